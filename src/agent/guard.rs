//! The framework's side of every tool call: what happens around a call
//! that the model asked for, before and after the tool itself.
//!
//! The order is fixed: the tool policy (is the tool offered at all?), loop
//! detection (is the model going round in circles?), the arguments against
//! the tool's JSON schema (a malformed call is never put to the user), the
//! `before_tool_call` hooks (may veto or rewrite params), then — in the loop itself — the
//! permission question and the execution with its cancel token, and
//! finally the `after_tool_call` hooks (may rewrite the result), result
//! sanitising (terminal escapes and control characters stripped) and
//! truncation. Each step that refuses a call turns it into an error result
//! the model sees; only the loop breaker ends the run.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::hooks::{Before, Event, Hooks, Origin};
use super::loops::{LoopDetector, Verdict};
use super::policy::ToolPolicy;
use super::{Mode, RunStop};
use crate::config::LoopSettings;
use crate::llm::{Content, ToolCall};
use crate::tools::shell::{clean_text, truncate_head};
use crate::tools::{Tool, ToolOutput};

/// A session's policy, loop history and hooks.
#[derive(Debug)]
pub struct ToolGuard {
    pub policy: ToolPolicy,
    pub hooks: Hooks,
    /// Shared by every run of the session, whatever the model.
    loops: Arc<Mutex<LoopDetector>>,
    session_id: String,
    cwd: PathBuf,
}

impl Default for ToolGuard {
    fn default() -> Self {
        Self::new(
            ToolPolicy::default(),
            Arc::new(Mutex::new(LoopDetector::new(LoopSettings::default()))),
            Hooks::default(),
            "",
            Path::new("."),
        )
    }
}

/// What becomes of a call before it runs.
#[derive(Debug)]
pub enum Admission {
    /// Run it with these params (rewritten by hooks, or the model's own);
    /// the warning goes at the end of its result.
    Run {
        params: Value,
        warning: Option<String>,
    },
    /// Do not run it; this is its result.
    Refuse(ToolOutput),
    /// Do not run it, and end the run; the text is for the user.
    Break(String),
}

impl ToolGuard {
    /// The guard of session `session_id`, working in `cwd` (where hooks
    /// run).
    pub fn new(
        policy: ToolPolicy,
        loops: Arc<Mutex<LoopDetector>>,
        hooks: Hooks,
        session_id: &str,
        cwd: &Path,
    ) -> Self {
        Self {
            policy,
            hooks,
            loops,
            session_id: session_id.to_string(),
            cwd: cwd.to_path_buf(),
        }
    }

    /// The guard of a helper this guard's session starts: `policy` (this
    /// one's, narrowed), the same hooks, and a loop history of its own
    /// with the same thresholds.
    pub fn for_child(&self, policy: ToolPolicy, session_id: &str) -> Self {
        let settings = self.loops.lock().settings();
        Self::new(
            policy,
            Arc::new(Mutex::new(LoopDetector::new(settings))),
            self.hooks.clone(),
            session_id,
            &self.cwd,
        )
    }

    fn origin(&self) -> Origin<'_> {
        Origin {
            session_id: &self.session_id,
            cwd: &self.cwd,
        }
    }

    /// Whether `tool` is offered to the model in `mode`.
    pub fn offers(&self, tool: &dyn Tool, mode: Mode) -> bool {
        self.policy
            .check(tool.name(), tool.mutating(), mode)
            .is_ok()
    }

    /// Policy, loop detection and the `before_tool_call` hooks. `tool` is
    /// `None` for a name the model made up.
    pub async fn admit(
        &self,
        tool: Option<&dyn Tool>,
        call: &ToolCall,
        mode: Mode,
        cancel: &CancellationToken,
    ) -> Admission {
        let refusal = match tool {
            None => Some(format!("Tool {} not found.", call.name)),
            Some(tool) => self
                .policy
                .check(tool.name(), tool.mutating(), mode)
                .err()
                .map(|why| {
                    format!(
                        "Tool {} is not available here ({why}). Use only the tools you were given.",
                        call.name
                    )
                }),
        };
        // Refused calls count too: a model that keeps calling a forbidden
        // tool is looping as surely as one that repeats a read.
        let verdict = self.loops.lock().check(&call.name, &call.arguments);
        let warning = match verdict {
            Verdict::Break(text) => return Admission::Break(text),
            Verdict::Block(text) => return Admission::Refuse(ToolOutput::error(text)),
            Verdict::Warn(text) => Some(text),
            Verdict::Ok => None,
        };
        if let Some(text) = refusal {
            return Admission::Refuse(ToolOutput::error(text));
        }
        if let Some(tool) = tool
            && let Err(text) = check_arguments(tool, &call.arguments)
        {
            return Admission::Refuse(ToolOutput::error(text));
        }
        match self
            .hooks
            .before_tool_call(self.origin(), &call.name, &call.id, &call.arguments, cancel)
            .await
        {
            Before::Block(reason) => {
                Admission::Refuse(ToolOutput::error(format!("Blocked by a hook: {reason}")))
            }
            Before::Run(params) => Admission::Run { params, warning },
        }
    }

    /// The `after_tool_call` hooks, sanitising and truncation, the loop
    /// warning; and the result is remembered for loop detection.
    pub async fn finish(
        &self,
        call: &ToolCall,
        params: &Value,
        mut output: ToolOutput,
        warning: Option<String>,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        if !self.hooks.is_empty() {
            let after = self
                .hooks
                .after_tool_call(
                    self.origin(),
                    &call.name,
                    &call.id,
                    params,
                    &output.content,
                    output.is_error,
                    cancel,
                )
                .await;
            if let Some(content) = after.content {
                // What the editor shows follows what the model sees.
                output.display.clear();
                output.content = content;
            }
            if let Some(is_error) = after.is_error {
                output.is_error = is_error;
            }
        }
        sanitise(&mut output.content);
        // The outcome is what the tool returned; the warning would make
        // every repeat look like news.
        self.record(call, &output);
        if let Some(warning) = warning {
            output.content.push(Content::text(warning));
        }
        output
    }

    /// Remembers what a call returned (also for calls that never ran).
    pub fn record(&self, call: &ToolCall, output: &ToolOutput) {
        let content = serde_json::to_value(&output.content).unwrap_or(Value::Null);
        self.loops
            .lock()
            .finished(&call.name, &call.arguments, &content, output.is_error);
    }

    /// Runs the hooks of an event that only informs.
    pub async fn notify(
        &self,
        event: Event,
        fields: Map<String, Value>,
        cancel: &CancellationToken,
    ) {
        if !self.hooks.is_empty() {
            self.hooks
                .notify(event, self.origin(), fields, cancel)
                .await;
        }
    }

    /// The `user_prompt_submit` hooks; `Err` says why the prompt is
    /// refused.
    pub async fn prompt_submitted(
        &self,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        self.hooks
            .user_prompt_submit(self.origin(), prompt, cancel)
            .await
    }

    /// Tells the `agent_end` hooks how a run ended.
    pub async fn run_ended(&self, stop: &RunStop) {
        let mut fields = Map::new();
        fields.insert("stop_reason".into(), Value::from(stop_id(stop)));
        // The hook is told even when the run was cancelled.
        self.notify(Event::AgentEnd, fields, &CancellationToken::new())
            .await;
    }
}

/// The arguments against the tool's schema; `Err` is the result the model
/// sees, naming each problem and where it is. A schema pincer cannot read
/// (an MCP server's, in a dialect the validator does not know) checks
/// nothing: the server still checks its own input.
fn check_arguments(tool: &dyn Tool, arguments: &Value) -> Result<(), String> {
    let validator = match crate::tools::arguments_check(&tool.parameters()) {
        Ok(validator) => validator,
        Err(error) => {
            tracing::debug!(tool = tool.name(), %error, "tool schema not usable for validation");
            return Ok(());
        }
    };
    let problems = validator.problems(arguments);
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "Invalid arguments for {}: {}. Nothing was run. Check the tool's parameter schema and call it again.",
        tool.name(),
        problems.join("; ")
    ))
}

fn stop_id(stop: &RunStop) -> &'static str {
    match stop {
        RunStop::EndTurn => "end_turn",
        RunStop::MaxTokens => "max_tokens",
        RunStop::Refusal => "refusal",
        RunStop::Cancelled => "cancelled",
        RunStop::MaxTurns => "max_turn_requests",
        RunStop::LoopDetected(_) => "loop_detected",
        RunStop::Blocked(_) => "blocked",
        RunStop::Failed(_) => "error",
    }
}

/// Terminal escapes and control characters out, each text held to the
/// output limits.
pub fn sanitise(content: &mut [Content]) {
    for part in content {
        if let Content::Text { text } = part {
            let clean = clean_text(text);
            let bounded = truncate_head(&clean);
            if let std::borrow::Cow::Owned(new) = bounded {
                *text = new;
            } else if let std::borrow::Cow::Owned(new) = clean {
                *text = new;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn arguments_are_checked_against_the_tools_schema() {
        let write = crate::tools::write::WriteTool;
        assert_eq!(
            check_arguments(
                &write,
                &serde_json::json!({"path": "a.txt", "content": "x"})
            ),
            Ok(())
        );
        assert_eq!(
            check_arguments(&write, &serde_json::json!({"path": "a.txt"})),
            Err("Invalid arguments for write: \"content\" is a required property. Nothing was run. Check the tool's parameter schema and call it again.".to_string())
        );
        assert_eq!(
            check_arguments(&write, &serde_json::json!({"path": 5, "content": "x"})),
            Err("Invalid arguments for write: /path: 5 is not of type \"string\". Nothing was run. Check the tool's parameter schema and call it again.".to_string())
        );
    }

    #[test]
    fn sanitising_strips_escapes_and_controls_and_bounds_the_text() {
        let mut content = vec![
            Content::text("\u{1b}[31mred\u{1b}[0m and \u{7}bell\u{0}\r\nnext\tline"),
            Content::text("plain\r\ntext stays as it is"),
            Content::text("x\n".repeat(3_000)),
        ];
        sanitise(&mut content);
        assert_eq!(content[0], Content::text("red and bell\nnext\tline"));
        assert_eq!(content[1], Content::text("plain\r\ntext stays as it is"));
        let Content::Text { text } = &content[2] else {
            panic!()
        };
        assert_eq!(text.lines().count(), 2_001);
        assert!(
            text.ends_with(
                "[… 1000 more lines (2000 bytes) left out; the limit is 2000 lines or 50 KB]"
            ),
            "{}",
            &text[text.len() - 100..]
        );
    }
}
