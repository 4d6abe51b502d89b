//! One run through Claude Code: the prompt goes in as a user line, and
//! what the CLI writes back becomes pincer's agent events and history.
//!
//! - `stream_event` lines carry the raw Anthropic stream; they go through
//!   the same parser as pincer's own Anthropic calls, so deltas, thinking,
//!   tool calls, usage and stop reasons are read the same way. Each
//!   finished message is an assistant message in the history, recording
//!   the provider, api and model that really answered.
//! - A tool call arrives as an MCP `tools/call` that names the `tool_use`
//!   it answers (`_meta["claudecode/toolUseId"]`). It is paired with that
//!   `tool_use` by id alone and run through [`crate::agent::run_tool_call`];
//!   a call that names no `tool_use` of this run is refused with an error
//!   result, still with its start and end. A `tool_use` the CLI answered
//!   itself (bad input, a denial) gets its start, end and result from the
//!   CLI's `tool_result`.
//! - Claude Code's compaction (`status: compacting`, `compact_boundary`
//!   and the summary after it) becomes pincer's compaction start and end.
//! - Messages the user sends meanwhile wait for the CLI's `result` and go
//!   in as the next user lines: Claude Code takes no message mid-turn.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::process::Process;
use super::wire;
use crate::agent::{
    AgentEvent, AgentMessage, DELTA_INTERVAL, DeltaThrottle, Run, RunStop, compaction, sleep_until,
};
use crate::llm::{
    AssistantMessage, LlmError, Message, MessageBuilder, Model, StreamEvent, ToolCall,
    ToolResultMessage, WireFormat, anthropic, sse,
};
use crate::mcp::server::{self as mcp_server, Handled};
use crate::tools::{Tool, ToolOutput};

/// How a run through Claude Code ended.
#[derive(Debug)]
pub enum Outcome {
    Done(RunStop),
    /// `--resume` named a session the CLI does not have.
    UnknownSession,
    /// The conversation is too long; `compacted`: Claude Code compacted
    /// during the run, so one more try may fit.
    Overflow {
        compacted: bool,
    },
    /// It failed before anything was shown; the text says why.
    Unavailable(String),
}

/// How long an interrupted CLI gets to end its turn before it is killed.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// A tool call that finished running.
struct Finished {
    request_id: Value,
    mcp_id: Value,
    call: ToolCall,
    output: ToolOutput,
    /// The loop breaker's message, when the run must end.
    stop: Option<String>,
}

/// The message being streamed.
struct Streaming {
    parser: anthropic::Parser,
    builder: MessageBuilder,
    model: String,
    failed: Option<LlmError>,
}

/// A compaction Claude Code reported, waiting for its summary.
struct Boundary {
    reason: compaction::Reason,
    tokens_before: u64,
    tokens_after: u64,
}

struct Turn<'a> {
    run: Run<'a>,
    /// Tools the model is offered (listed and allowed).
    offered: Vec<Arc<dyn Tool>>,
    deltas: DeltaThrottle,
    message: Option<Streaming>,
    /// A model call whose tool calls are not all answered yet: its usage.
    open_turn: Option<crate::llm::Usage>,
    /// Tool calls of this run by id, and which have results.
    calls: HashMap<String, ToolCall>,
    answered: HashSet<String>,
    running: HashSet<String>,
    /// Cancel tokens of running calls, by control request id.
    tokens: HashMap<String, CancellationToken>,
    /// Something was shown: text, thinking or a tool call.
    output_seen: bool,
    init_seen: bool,
    compacting: Option<compaction::Reason>,
    boundary: Option<Boundary>,
    compacted: bool,
    /// The error class of the CLI's last synthetic error message.
    api_error: Option<String>,
    interrupted: bool,
    broken: Option<String>,
    /// User lines sent that have no `result` yet.
    awaiting: usize,
    /// Tool calls that came while their message was still streaming; they
    /// start once it is in the history, so that results follow their call.
    deferred: Vec<(Value, mcp_server::Call)>,
}

/// Runs the prompt `first` through `process` until the CLI answered it
/// and every message queued meanwhile.
pub async fn drive(
    process: &mut Process,
    run: Run<'_>,
    history: &mut Vec<AgentMessage>,
    first: Value,
) -> Outcome {
    let offered = crate::agent::offered_tools(run.tools, run.config).await;
    // Calls run against everything there is, as in the native loop (the
    // policy refuses what it does not offer, with its reason).
    let mut all: Vec<Arc<dyn Tool>> = run.tools.to_vec();
    if let Some(source) = &run.config.extra_tools {
        all.extend(source.tools().await);
    }
    let all = all.as_slice();
    let mut turn = Turn {
        run,
        offered,
        deltas: DeltaThrottle::new(DELTA_INTERVAL),
        message: None,
        open_turn: None,
        calls: HashMap::new(),
        answered: HashSet::new(),
        running: HashSet::new(),
        tokens: HashMap::new(),
        output_seen: false,
        init_seen: false,
        compacting: None,
        boundary: None,
        compacted: false,
        api_error: None,
        interrupted: false,
        broken: None,
        awaiting: 1,
        deferred: Vec::new(),
    };
    if !process.initialized {
        let id = process.request_id();
        if let Err(e) = process
            .send(&wire::control_request(&id, "initialize"))
            .await
        {
            return turn.io_failed(process, history, &e).await;
        }
        process.initialized = true;
    }
    if let Err(e) = process.send(&first).await {
        return turn.io_failed(process, history, &e).await;
    }
    let mut running: FuturesUnordered<BoxFuture<'_, Finished>> = FuturesUnordered::new();
    let mut grace: Option<tokio::time::Instant> = None;
    // A CLI that says nothing for the stream's idle timeout while no tool
    // of pincer's runs (and no question waits for the user) is stuck, as a
    // provider stream would be.
    let idle = run.config.stream.idle_timeout;
    let mut heard = tokio::time::Instant::now();
    loop {
        let flush_at = turn.deltas.deadline();
        let silent_until = (running.is_empty() && grace.is_none()).then_some(heard + idle);
        tokio::select! {
            line = process.next() => {
                heard = tokio::time::Instant::now();
                let Some(line) = line else {
                    return turn.exited(process, history).await;
                };
                if let Some(outcome) = turn.line(process, history, all, &mut running, line).await {
                    return outcome;
                }
            }
            Some(done) = running.next(), if !running.is_empty() => {
                heard = tokio::time::Instant::now();
                turn.finished(process, history, done).await;
            }
            () = sleep_until(silent_until), if silent_until.is_some() => {
                tracing::warn!(seconds = idle.as_secs(), "Claude Code made no progress; stopping it");
                process.kill();
                return turn.stalled(history, idle);
            }
            () = sleep_until(flush_at), if flush_at.is_some() => turn.deltas.flush(run.host),
            () = run.cancel.cancelled(), if grace.is_none() => {
                turn.interrupted = true;
                grace = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                let id = process.request_id();
                if process.send(&wire::control_request(&id, "interrupt")).await.is_err() {
                    process.kill();
                }
            }
            () = sleep_until(grace), if grace.is_some() => {
                tracing::warn!("Claude Code did not end its turn after an interrupt; stopping it");
                process.kill();
                turn.close_open_calls(history, CANCELLED);
                return Outcome::Done(RunStop::Cancelled);
            }
        }
    }
}

const CANCELLED: &str = "Cancelled by the user before this tool ran.";
const NOT_ANSWERED: &str =
    "Claude Code ended the turn before this call ran; its outcome is unknown.";

impl<'a> Turn<'a> {
    /// Handles one line; `Some` when the run is over.
    async fn line(
        &mut self,
        process: &mut Process,
        history: &mut Vec<AgentMessage>,
        all: &'a [Arc<dyn Tool>],
        running: &mut FuturesUnordered<BoxFuture<'a, Finished>>,
        line: Value,
    ) -> Option<Outcome> {
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        if self.boundary.is_some() && kind != "user" {
            self.end_compaction(history, None);
        }
        match kind {
            "stream_event" if line.get("parent_tool_use_id").is_none_or(Value::is_null) => {
                self.stream_event(history, &line["event"]);
            }
            "assistant" => {
                if let Some(error) = line.get("error").and_then(Value::as_str) {
                    self.api_error = Some(error.to_string());
                }
            }
            "user" => self.user(history, all, &line),
            "system" => self.system(process, &line),
            "control_request" => {
                self.control_request(process, all, running, &line).await;
            }
            "control_response" if line["response"]["subtype"] == "error" => {
                tracing::warn!(error = %line["response"]["error"], "Claude Code refused a control request");
            }
            "result" => return self.result(process, history, &line).await,
            // control_cancel_request names a request being answered; the
            // call ends with the run's own cancel if it comes to that.
            "control_cancel_request" => {
                if let Some(token) = line["request_id"]
                    .as_str()
                    .and_then(|id| self.tokens.get(id))
                {
                    token.cancel();
                }
            }
            _ => {}
        }
        if self.message.is_none() && !self.deferred.is_empty() {
            for (request_id, call) in std::mem::take(&mut self.deferred) {
                if let Some(answer) = self.start_call(all, running, request_id, call) {
                    let _ = process.send(&answer).await;
                }
            }
        }
        None
    }

    fn stream_event(&mut self, history: &mut Vec<AgentMessage>, event: &Value) {
        let Some(kind) = event.get("type").and_then(Value::as_str) else {
            return;
        };
        let host = self.run.host;
        if kind == "message_start" {
            self.end_turn(history);
            host.emit(AgentEvent::TurnStart);
            host.emit(AgentEvent::MessageStart);
            self.message = Some(Streaming {
                parser: anthropic::Parser::new(&self.run.config.model.provider),
                builder: MessageBuilder::new(),
                model: event["message"]["model"]
                    .as_str()
                    .unwrap_or(&self.run.config.model.id)
                    .to_string(),
                failed: None,
            });
        }
        let Some(message) = self.message.as_mut() else {
            return;
        };
        let sse_event = sse::Event {
            event: kind.to_string(),
            data: event.to_string(),
            id: None,
        };
        match message.parser.on_event(&sse_event) {
            Ok(events) => {
                for mut event in events {
                    match &mut event {
                        StreamEvent::TextDelta(text) => {
                            self.output_seen = true;
                            self.deltas.push(false, text, host);
                        }
                        StreamEvent::ThinkingDelta(text) => {
                            self.output_seen = true;
                            self.deltas.push(true, text, host);
                        }
                        StreamEvent::ToolCallStart { name, .. } => {
                            self.output_seen = true;
                            if let Some(pincer) = wire::pincer_name(name) {
                                *name = pincer.to_string();
                            }
                        }
                        _ => {}
                    }
                    message.builder.apply(&event);
                }
            }
            Err(error) => message.failed = Some(error),
        }
        if kind == "message_stop" || message.failed.is_some() {
            self.end_message(history);
        }
    }

    /// The streamed message is complete: into the history it goes.
    fn end_message(&mut self, history: &mut Vec<AgentMessage>) {
        let Some(message) = self.message.take() else {
            return;
        };
        let host = self.run.host;
        self.deltas.flush(host);
        self.deltas.finish(host);
        let answered_by = Model {
            id: message.model.clone(),
            ..self.run.config.model.clone()
        };
        let error = message
            .failed
            .as_ref()
            .map(|e| (crate::llm::StopReason::Error, e.to_string()));
        let assistant: AssistantMessage = message.builder.finish(&answered_by, None, error);
        for call in assistant.tool_calls() {
            self.calls.insert(call.id.clone(), call.clone());
        }
        let usage = assistant.usage;
        host.emit(AgentEvent::MessageEnd(Box::new(assistant.clone())));
        history.push(AgentMessage::Llm {
            message: Message::Assistant(assistant),
        });
        self.open_turn = Some(usage);
        self.end_turn_if_answered(history);
    }

    /// Closes the model call once each of its tool calls has a result.
    fn end_turn_if_answered(&mut self, history: &[AgentMessage]) {
        if self.calls.keys().all(|id| self.answered.contains(id)) {
            self.end_turn(history);
        }
    }

    fn end_turn(&mut self, history: &[AgentMessage]) {
        if let Some(usage) = self.open_turn.take() {
            let config = self.run.config;
            self.run.host.emit(AgentEvent::TurnEnd {
                context_tokens: compaction::context_tokens(history, &config.system_prompt),
                context_window: config.model.context_window,
                usage,
            });
        }
    }

    /// A `user` line: tool results the CLI gave itself, or the summary
    /// after a compaction.
    fn user(&mut self, history: &mut Vec<AgentMessage>, all: &[Arc<dyn Tool>], line: &Value) {
        if line.get("isReplay").and_then(Value::as_bool) == Some(true) {
            return;
        }
        let content = &line["message"]["content"];
        if self.boundary.is_some() {
            let summary = match content {
                Value::String(text) => Some(text.clone()),
                Value::Array(blocks) => blocks
                    .iter()
                    .find_map(|b| b.get("text").and_then(Value::as_str))
                    .map(str::to_string),
                _ => None,
            };
            self.end_compaction(history, summary);
            return;
        }
        let Some(blocks) = content.as_array() else {
            return;
        };
        for block in blocks {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
                continue;
            };
            if self.answered.contains(id) || self.running.contains(id) {
                continue;
            }
            let Some(call) = self.calls.get(id).cloned() else {
                continue;
            };
            // Claude Code answered this call without pincer (it refused the
            // input, or was denied): the call still starts and ends here.
            let output = ToolOutput {
                content: wire::result_content(&block["content"]),
                is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
                details: Value::Null,
                display: Vec::new(),
            };
            self.settle(history, all, &call, output);
        }
        self.end_turn_if_answered(history);
    }

    /// Gives `call` a result that no tool run produced.
    fn settle(
        &mut self,
        history: &mut Vec<AgentMessage>,
        all: &[Arc<dyn Tool>],
        call: &ToolCall,
        output: ToolOutput,
    ) {
        let host = self.run.host;
        // A call that is running has had its start already.
        if !self.running.remove(&call.id) {
            host.emit(AgentEvent::ToolExecutionStart {
                call: call.clone(),
                info: crate::agent::describe(all, call, self.run.cwd),
            });
        }
        self.run.config.guard.record(call, &output);
        host.emit(AgentEvent::ToolExecutionEnd {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            output: output.clone(),
        });
        self.answered.insert(call.id.clone());
        history.push(AgentMessage::Llm {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                content: output.content,
                is_error: output.is_error,
            }),
        });
    }

    /// Calls of this run that never got a result get one, so that the
    /// history stays valid for any model.
    fn close_open_calls(&mut self, history: &mut Vec<AgentMessage>, why: &str) {
        self.end_message(history);
        let open: Vec<ToolCall> = self
            .calls
            .values()
            .filter(|c| !self.answered.contains(&c.id))
            .cloned()
            .collect();
        for call in open {
            self.settle(history, &[], &call, ToolOutput::error(why));
        }
        self.end_turn(history);
    }

    fn system(&mut self, process: &mut Process, line: &Value) {
        let host = self.run.host;
        match line.get("subtype").and_then(Value::as_str) {
            Some("init") => {
                self.init_seen = true;
                if let Some(id) = line.get("session_id").and_then(Value::as_str)
                    && !id.is_empty()
                {
                    process.session_id = id.to_string();
                }
            }
            Some("status") => {
                if line.get("status").and_then(Value::as_str) == Some("compacting")
                    && self.compacting.is_none()
                {
                    self.compacting = Some(compaction::Reason::Threshold);
                    host.emit(AgentEvent::CompactionStart {
                        reason: compaction::Reason::Threshold,
                    });
                }
                match line.get("compact_result").and_then(Value::as_str) {
                    None | Some("success") => {}
                    Some(_) => {
                        let reason = self
                            .compacting
                            .take()
                            .unwrap_or(compaction::Reason::Threshold);
                        let error = line
                            .get("compact_error")
                            .and_then(Value::as_str)
                            .unwrap_or("Claude Code could not compact the conversation")
                            .to_string();
                        host.emit(AgentEvent::CompactionEnd {
                            reason,
                            result: Err(error),
                        });
                    }
                }
            }
            Some("compact_boundary") => {
                let meta = &line["compact_metadata"];
                let reason = match meta.get("trigger").and_then(Value::as_str) {
                    Some("manual") => compaction::Reason::Manual,
                    _ => compaction::Reason::Threshold,
                };
                let reason = match self.compacting.take() {
                    Some(started) => started,
                    None => {
                        host.emit(AgentEvent::CompactionStart { reason });
                        reason
                    }
                };
                self.compacted = true;
                self.boundary = Some(Boundary {
                    reason,
                    tokens_before: meta.get("pre_tokens").and_then(Value::as_u64).unwrap_or(0),
                    tokens_after: meta.get("post_tokens").and_then(Value::as_u64).unwrap_or(0),
                });
            }
            Some("api_retry") => {
                let status = line
                    .get("error_status")
                    .and_then(Value::as_u64)
                    .map(|s| format!(" (HTTP {s})"))
                    .unwrap_or_default();
                host.emit(AgentEvent::Retry {
                    attempt: line.get("attempt").and_then(Value::as_u64).unwrap_or(1) as u32,
                    delay: Duration::from_millis(
                        line.get("retry_delay_ms")
                            .and_then(Value::as_u64)
                            .unwrap_or(0),
                    ),
                    error: format!(
                        "Claude Code: {}{status}",
                        line.get("error").and_then(Value::as_str).unwrap_or("error")
                    ),
                });
            }
            _ => {}
        }
    }

    /// Claude Code compacted: the same compaction in pincer's history,
    /// keeping this run's messages, with Claude Code's summary.
    fn end_compaction(&mut self, history: &mut Vec<AgentMessage>, summary: Option<String>) {
        let Some(boundary) = self.boundary.take() else {
            return;
        };
        let summary = summary.unwrap_or_else(|| {
            "Claude Code compacted the conversation; its summary was not shown.".to_string()
        });
        let kept = history[wire::prompt_start(history)..]
            .iter()
            .filter(|e| matches!(e, AgentMessage::Llm { .. }))
            .count();
        compaction::restore(history, summary.clone(), kept, boundary.tokens_before);
        self.run.host.emit(AgentEvent::CompactionEnd {
            reason: boundary.reason,
            result: Ok(compaction::Compacted {
                summary,
                files: Default::default(),
                kept,
                tokens_before: boundary.tokens_before,
                tokens_after: boundary.tokens_after,
            }),
        });
    }

    async fn control_request(
        &mut self,
        process: &mut Process,
        all: &'a [Arc<dyn Tool>],
        running: &mut FuturesUnordered<BoxFuture<'a, Finished>>,
        line: &Value,
    ) {
        let request_id = line.get("request_id").cloned().unwrap_or(Value::Null);
        let request = &line["request"];
        let answer = match request.get("subtype").and_then(Value::as_str) {
            Some("can_use_tool") => {
                // pincer's own permission question comes when the call
                // runs, after its policy and hooks; here only pincer's
                // tools pass.
                let name = request["tool_name"].as_str().unwrap_or("");
                let ours = wire::pincer_name(name)
                    .is_some_and(|n| self.offered.iter().any(|t| t.name() == n));
                let response = if ours {
                    json!({"behavior": "allow", "updatedInput": request["input"].clone()})
                } else {
                    json!({
                        "behavior": "deny",
                        "message": format!("{name} is not available here; use pincer's tools (mcp__pincer__*)."),
                    })
                };
                wire::control_success(&request_id, response)
            }
            Some("mcp_message") => {
                if request["server_name"] != super::process::SERVER_NAME {
                    wire::control_error(&request_id, "pincer hosts no such MCP server")
                } else {
                    match mcp_server::handle(&request["message"], &self.offered) {
                        Handled::Reply(reply) => {
                            wire::control_success(&request_id, json!({"mcp_response": reply}))
                        }
                        Handled::Notification => wire::control_success(
                            &request_id,
                            json!({"mcp_response": {"jsonrpc": "2.0", "result": {}}}),
                        ),
                        Handled::Call(call) if self.message.is_some() => {
                            self.deferred.push((request_id, call));
                            return;
                        }
                        Handled::Call(call) => {
                            match self.start_call(all, running, request_id.clone(), call) {
                                Some(answer) => answer,
                                None => return,
                            }
                        }
                    }
                }
            }
            other => wire::control_error(
                &request_id,
                &format!("pincer does not handle {}", other.unwrap_or("this request")),
            ),
        };
        if let Err(e) = process.send(&answer).await {
            tracing::warn!(error = %e, "could not answer Claude Code");
        }
    }

    /// Starts a `tools/call`, paired with its `tool_use` by id; returns
    /// the answer at once when the call cannot be paired.
    fn start_call(
        &mut self,
        all: &'a [Arc<dyn Tool>],
        running: &mut FuturesUnordered<BoxFuture<'a, Finished>>,
        request_id: Value,
        call: mcp_server::Call,
    ) -> Option<Value> {
        let paired = call
            .tool_use_id
            .as_deref()
            .and_then(|id| self.calls.get(id))
            .filter(|tool_use| {
                !self.answered.contains(&tool_use.id)
                    && !self.running.contains(&tool_use.id)
                    && tool_use.name == call.name
            })
            .cloned();
        let Some(tool_use) = paired else {
            let why = match &call.tool_use_id {
                None => "Claude Code did not say which tool_use it answers".to_string(),
                Some(id) => format!(
                    "it names tool_use {id}, which the model did not ask for in this run or which already ran"
                ),
            };
            tracing::warn!(tool = %call.name, "a tool call from Claude Code could not be paired: {why}");
            let unpaired = ToolCall {
                id: format!("unpaired-{}", uuid::Uuid::new_v4().simple()),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                arguments_error: None,
            };
            let output = ToolOutput::error(format!(
                "pincer did not run this call: {why}. Call the tool again."
            ));
            let host = self.run.host;
            host.emit(AgentEvent::ToolExecutionStart {
                call: unpaired.clone(),
                info: crate::agent::describe(all, &unpaired, self.run.cwd),
            });
            host.emit(AgentEvent::ToolExecutionEnd {
                call_id: unpaired.id.clone(),
                tool_name: unpaired.name.clone(),
                output: output.clone(),
            });
            return Some(wire::control_success(
                &request_id,
                json!({"mcp_response": mcp_server::call_result(call.id, &output)}),
            ));
        };
        let run_call = ToolCall {
            // What Claude Code runs: the input after the permission answer.
            arguments: call.arguments,
            ..tool_use
        };
        let token = self.run.cancel.child_token();
        if let Some(key) = request_id.as_str() {
            self.tokens.insert(key.to_string(), token.clone());
        }
        self.running.insert(run_call.id.clone());
        let run = self.run;
        let mcp_id = call.id;
        running.push(Box::pin(async move {
            let (output, stop) =
                crate::agent::run_tool_call(run.config, all, run.cwd, &run_call, run.host, &token)
                    .await;
            Finished {
                request_id,
                mcp_id,
                call: run_call,
                output,
                stop,
            }
        }));
        None
    }

    async fn finished(
        &mut self,
        process: &mut Process,
        history: &mut Vec<AgentMessage>,
        done: Finished,
    ) {
        if let Some(key) = done.request_id.as_str() {
            self.tokens.remove(key);
        }
        self.running.remove(&done.call.id);
        self.answered.insert(done.call.id.clone());
        history.push(AgentMessage::Llm {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: done.call.id.clone(),
                tool_name: done.call.name.clone(),
                content: done.output.content.clone(),
                is_error: done.output.is_error,
            }),
        });
        let answer = wire::control_success(
            &done.request_id,
            json!({"mcp_response": mcp_server::call_result(done.mcp_id, &done.output)}),
        );
        if let Err(e) = process.send(&answer).await {
            tracing::warn!(error = %e, "could not give Claude Code a tool result");
        }
        if let Some(text) = done.stop
            && self.broken.is_none()
        {
            // Going round in circles: the run ends.
            self.broken = Some(text);
            let id = process.request_id();
            let _ = process.send(&wire::control_request(&id, "interrupt")).await;
        }
        self.end_turn_if_answered(history);
    }

    /// The CLI answered one user line.
    async fn result(
        &mut self,
        process: &mut Process,
        history: &mut Vec<AgentMessage>,
        line: &Value,
    ) -> Option<Outcome> {
        self.end_message(history);
        self.awaiting = self.awaiting.saturating_sub(1);
        let subtype = line.get("subtype").and_then(Value::as_str).unwrap_or("");
        let is_error = line.get("is_error").and_then(Value::as_bool) == Some(true);
        if self.interrupted {
            self.close_open_calls(history, CANCELLED);
            return Some(Outcome::Done(RunStop::Cancelled));
        }
        if let Some(text) = self.broken.clone() {
            self.close_open_calls(history, NOT_ANSWERED);
            return Some(Outcome::Done(RunStop::LoopDetected(text)));
        }
        if subtype == "error_max_turns" {
            self.close_open_calls(history, NOT_ANSWERED);
            return Some(Outcome::Done(RunStop::MaxTurns));
        }
        if subtype != "success" || is_error {
            self.close_open_calls(history, NOT_ANSWERED);
            let text = line
                .get("result")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| {
                    line.get("errors").and_then(Value::as_array).map(|errors| {
                        errors
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                })
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| format!("the turn ended with `{subtype}`"));
            if subtype == "error_during_execution" && !self.init_seen && process.resumed {
                return Some(Outcome::UnknownSession);
            }
            let status = line.get("api_error_status").and_then(Value::as_u64);
            if text.to_ascii_lowercase().starts_with("prompt is too long") {
                return Some(Outcome::Overflow {
                    compacted: self.compacted,
                });
            }
            if !self.output_seen {
                return Some(Outcome::Unavailable(text));
            }
            let error = to_llm_error(
                &self.run.config.model.provider,
                self.api_error.as_deref(),
                status,
                text,
            );
            return Some(Outcome::Done(RunStop::Failed(error)));
        }
        self.end_turn(history);
        // Messages the user sent meanwhile: each goes in as the next user
        // line, and the run goes on until the CLI answered them all.
        let host = self.run.host;
        let mut queued = host.take_steering();
        queued.extend(host.take_follow_up());
        for content in queued {
            let time = crate::agent::time_line(self.run.config);
            host.emit(AgentEvent::UserMessage {
                content: content.clone(),
                time: time.clone(),
            });
            crate::agent::push_user(history, content.clone(), time.clone());
            if let Err(e) = process.send(&wire::queued_line(&content, &time)).await {
                tracing::warn!(error = %e, "could not give Claude Code a queued message");
                continue;
            }
            self.awaiting += 1;
        }
        if self.awaiting > 0 {
            return None;
        }
        let stop = match line.get("stop_reason").and_then(Value::as_str) {
            Some("max_tokens") | Some("model_context_window_exceeded") => RunStop::MaxTokens,
            Some("refusal") => RunStop::Refusal,
            _ => RunStop::EndTurn,
        };
        Some(Outcome::Done(stop))
    }

    /// stdout closed: the CLI exited.
    async fn exited(&mut self, process: &mut Process, history: &mut Vec<AgentMessage>) -> Outcome {
        let (code, stderr) = process.ended().await;
        self.close_open_calls(history, NOT_ANSWERED);
        if self.interrupted {
            return Outcome::Done(RunStop::Cancelled);
        }
        if process.resumed && !self.init_seen && stderr.contains("No conversation found") {
            return Outcome::UnknownSession;
        }
        let last = stderr.lines().last().unwrap_or("").trim();
        let why = format!(
            "it exited{} before the turn ended{}",
            code.map(|c| format!(" with code {c}")).unwrap_or_default(),
            if last.is_empty() {
                String::new()
            } else {
                format!(": {last}")
            }
        );
        if !self.output_seen {
            return Outcome::Unavailable(why);
        }
        Outcome::Done(RunStop::Failed(LlmError::MalformedStream {
            provider: format!("Claude Code ({})", self.run.config.model.provider),
            message: why,
        }))
    }

    /// The CLI went silent and was stopped.
    fn stalled(&mut self, history: &mut Vec<AgentMessage>, idle: Duration) -> Outcome {
        self.close_open_calls(history, NOT_ANSWERED);
        if !self.output_seen {
            return Outcome::Unavailable(format!("it made no progress for {} s", idle.as_secs()));
        }
        Outcome::Done(RunStop::Failed(LlmError::Timeout {
            provider: format!("Claude Code ({})", self.run.config.model.provider),
            seconds: idle.as_secs(),
        }))
    }

    async fn io_failed(
        &mut self,
        process: &mut Process,
        history: &mut Vec<AgentMessage>,
        error: &std::io::Error,
    ) -> Outcome {
        tracing::warn!(error = %error, "could not write to Claude Code");
        process.kill();
        self.exited(process, history).await
    }
}

/// Claude Code's error class (the assistant message's `error`) or HTTP
/// status as pincer's provider error, so that the user reads the same
/// kind of message as from pincer's own calls.
pub(super) fn to_llm_error(
    provider: &str,
    class: Option<&str>,
    status: Option<u64>,
    message: String,
) -> LlmError {
    let provider = provider.to_string();
    match (class, status) {
        (Some("authentication_failed" | "oauth_org_not_allowed" | "account_on_hold"), _)
        | (_, Some(401 | 403)) => LlmError::Auth { provider, message },
        (Some("rate_limit"), _) | (_, Some(429)) => LlmError::RateLimit {
            provider,
            message,
            retry_after: None,
        },
        (Some("billing_error"), _) | (_, Some(402)) => LlmError::Billing { provider, message },
        (Some("overloaded"), _) | (_, Some(529)) => LlmError::Overloaded { provider, message },
        (Some("model_not_found"), _) | (_, Some(404)) => {
            LlmError::ModelNotFound { provider, message }
        }
        (_, Some(status)) if status >= 500 => LlmError::Server {
            provider,
            status: status as u16,
            message,
        },
        (_, Some(status)) => LlmError::BadRequest {
            provider,
            status: status as u16,
            message,
        },
        _ => LlmError::Server {
            provider,
            status: 500,
            message,
        },
    }
}
