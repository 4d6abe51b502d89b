//! Hooks: the user's own programs, run at fixed points of a session, that
//! can veto or rewrite what the agent does.
//!
//! A hook is an external command from the config file, run with `sh -c` in
//! the session's directory. It gets one JSON object on stdin (the event,
//! the session id, the cwd, and what the event is about: the tool and its
//! params, the result, the prompt …) and may print one JSON object on
//! stdout:
//!
//! - `before_tool_call`: `{"block": true, "reason": "…"}` refuses the call
//!   (the model sees the reason), `{"params": {…}}` replaces parameters
//!   (merged key by key over the call's own). Hooks run one after another by
//!   priority (highest first), each seeing the params as rewritten so far;
//!   their answers merge field by field, later ones winning.
//! - `after_tool_call`: `{"content": "…" | [blocks], "is_error": bool}`
//!   replaces the result the model sees.
//! - `user_prompt_submit`: `{"block": true, "reason": "…"}` refuses the
//!   prompt.
//! - the others (`session_start`, `session_end`, `before_compaction`,
//!   `after_compaction`, `agent_end`) are told; what they print is ignored.
//!
//! A hook that exits non-zero, runs past its timeout (its whole process
//! group is killed) or prints something that is not a JSON object is
//! logged and ignored — unless it is configured `fail_closed`, in which case
//! a tool call or prompt it guards is refused.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

pub use crate::config::hooks::Event;
use crate::config::hooks::HookConfig;
use serde_json::{Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::llm::Content;

const DEFAULT_TIMEOUT_SECS: f64 = 30.0;
/// More than this on stdout is not an answer.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// What the `before_tool_call` hooks decided, merged.
#[derive(Clone, Debug, PartialEq)]
pub enum Before {
    /// Run with these params (the originals when no hook changed them).
    Run(Value),
    Block(String),
}

/// What the `after_tool_call` hooks made of a result.
#[derive(Clone, Debug, PartialEq)]
pub struct After {
    pub content: Option<Vec<Content>>,
    pub is_error: Option<bool>,
}

/// A session's hooks.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    hooks: Vec<HookConfig>,
    /// The session's sandbox, which hooks run in unless they say not to.
    sandbox: Option<std::sync::Arc<crate::tools::sandbox::Sandbox>>,
}

/// Who is asking, sent with every event.
#[derive(Clone, Copy, Debug)]
pub struct Origin<'a> {
    pub session_id: &'a str,
    pub cwd: &'a Path,
}

impl Hooks {
    pub fn new(mut hooks: Vec<HookConfig>) -> Self {
        // A stable sort keeps config order among equal priorities.
        hooks.sort_by_key(|h| std::cmp::Reverse(h.priority));
        Self {
            hooks,
            sandbox: None,
        }
    }

    /// With the session's sandbox: each hook runs in it unless its
    /// config says `sandbox = false`. Where the sandbox is not available
    /// here, hooks (the user's own commands) run as they would without.
    pub fn with_sandbox(
        mut self,
        sandbox: Option<std::sync::Arc<crate::tools::sandbox::Sandbox>>,
    ) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Runs `hook` with `input` in `cwd`, in the sandbox if it applies.
    async fn run(
        &self,
        hook: &HookConfig,
        cwd: &Path,
        input: &Value,
        cancel: &CancellationToken,
    ) -> Result<Map<String, Value>, HookError> {
        let confine = match (&self.sandbox, hook.sandbox) {
            (Some(sandbox), None | Some(true)) => match sandbox.confinement(cwd) {
                Ok(confine) => confine,
                Err(why) => {
                    tracing::debug!(%why, "hooks run unconfined: the sandbox is not available here");
                    None
                }
            },
            _ => None,
        };
        run(hook, cwd, input, cancel, confine.as_ref()).await
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    fn for_event<'a>(
        &'a self,
        event: Event,
        tool: Option<&'a str>,
    ) -> impl Iterator<Item = &'a HookConfig> + 'a {
        self.hooks.iter().filter(move |h| {
            h.event == event
                && match (&h.matcher, tool) {
                    (Some(glob), Some(tool)) => matches_glob(glob, tool),
                    _ => true,
                }
        })
    }

    /// Runs the `before_tool_call` hooks for a call.
    pub async fn before_tool_call(
        &self,
        origin: Origin<'_>,
        tool: &str,
        call_id: &str,
        params: &Value,
        cancel: &CancellationToken,
    ) -> Before {
        let mut params = params.clone();
        for hook in self.for_event(Event::BeforeToolCall, Some(tool)) {
            let input = payload(
                Event::BeforeToolCall,
                origin,
                [
                    ("tool_name", Value::from(tool)),
                    ("tool_call_id", Value::from(call_id)),
                    ("params", params.clone()),
                ],
            );
            let answer = match self.run(hook, origin.cwd, &input, cancel).await {
                Ok(answer) => answer,
                Err(error) => {
                    tracing::warn!(command = %hook.command, %error, "before_tool_call hook failed");
                    if hook.fail_closed {
                        return Before::Block(format!(
                            "Blocked: the hook `{}` that guards this tool failed ({error}).",
                            hook.command
                        ));
                    }
                    continue;
                }
            };
            if answer.get("block").and_then(Value::as_bool) == Some(true) {
                let reason = answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("Tool call blocked by a hook");
                return Before::Block(reason.to_string());
            }
            if let Some(Value::Object(new)) = answer.get("params") {
                match &mut params {
                    Value::Object(old) => {
                        for (k, v) in new {
                            old.insert(k.clone(), v.clone());
                        }
                    }
                    other => *other = Value::Object(new.clone()),
                }
            }
        }
        Before::Run(params)
    }

    /// Runs the `after_tool_call` hooks for a finished call.
    #[allow(clippy::too_many_arguments)]
    pub async fn after_tool_call(
        &self,
        origin: Origin<'_>,
        tool: &str,
        call_id: &str,
        params: &Value,
        content: &[Content],
        is_error: bool,
        cancel: &CancellationToken,
    ) -> After {
        let mut after = After {
            content: None,
            is_error: None,
        };
        for hook in self.for_event(Event::AfterToolCall, Some(tool)) {
            let current = after.content.as_deref().unwrap_or(content);
            let input = payload(
                Event::AfterToolCall,
                origin,
                [
                    ("tool_name", Value::from(tool)),
                    ("tool_call_id", Value::from(call_id)),
                    ("params", params.clone()),
                    (
                        "result",
                        serde_json::json!({
                            "content": serde_json::to_value(current).unwrap_or(Value::Null),
                            "is_error": after.is_error.unwrap_or(is_error),
                        }),
                    ),
                ],
            );
            match self.run(hook, origin.cwd, &input, cancel).await {
                Ok(answer) => {
                    if let Some(content) = answer.get("content").and_then(parse_content) {
                        after.content = Some(content);
                    }
                    if let Some(flag) = answer.get("is_error").and_then(Value::as_bool) {
                        after.is_error = Some(flag);
                    }
                }
                Err(error) => {
                    tracing::warn!(command = %hook.command, %error, "after_tool_call hook failed");
                    if hook.fail_closed {
                        after.content = Some(vec![Content::text(format!(
                            "The result was withheld: the hook `{}` that checks it failed ({error}).",
                            hook.command
                        ))]);
                        after.is_error = Some(true);
                        return after;
                    }
                }
            }
        }
        after
    }

    /// Runs the `user_prompt_submit` hooks; `Err` holds why the prompt is
    /// refused.
    pub async fn user_prompt_submit(
        &self,
        origin: Origin<'_>,
        prompt: &str,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        for hook in self.for_event(Event::UserPromptSubmit, None) {
            let input = payload(
                Event::UserPromptSubmit,
                origin,
                [("prompt", Value::from(prompt))],
            );
            match self.run(hook, origin.cwd, &input, cancel).await {
                Ok(answer) if answer.get("block").and_then(Value::as_bool) == Some(true) => {
                    return Err(answer
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("The prompt was blocked by a hook.")
                        .to_string());
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(command = %hook.command, %error, "user_prompt_submit hook failed");
                    if hook.fail_closed {
                        return Err(format!(
                            "The prompt was not sent: the hook `{}` failed ({error}).",
                            hook.command
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Tells the hooks of an event that only informs (`session_start`,
    /// `agent_end` …); `fields` describe it.
    pub async fn notify(
        &self,
        event: Event,
        origin: Origin<'_>,
        fields: Map<String, Value>,
        cancel: &CancellationToken,
    ) {
        for hook in self.for_event(event, None) {
            let input = payload(event, origin, fields.clone());
            if let Err(error) = self.run(hook, origin.cwd, &input, cancel).await {
                tracing::warn!(command = %hook.command, event = event.id(), %error, "hook failed");
            }
        }
    }
}

fn payload(
    event: Event,
    origin: Origin<'_>,
    fields: impl IntoIterator<Item = (impl Into<String>, Value)>,
) -> Value {
    let mut map = Map::new();
    map.insert("event".into(), Value::from(event.id()));
    map.insert("session_id".into(), Value::from(origin.session_id));
    map.insert(
        "cwd".into(),
        Value::from(origin.cwd.to_string_lossy().into_owned()),
    );
    for (k, v) in fields {
        map.insert(k.into(), v);
    }
    Value::Object(map)
}

/// A string, or an array of content blocks.
fn parse_content(value: &Value) -> Option<Vec<Content>> {
    match value {
        Value::String(text) => Some(vec![Content::text(text.clone())]),
        Value::Array(_) => serde_json::from_value(value.clone()).ok(),
        _ => None,
    }
}

fn matches_glob(glob: &str, name: &str) -> bool {
    globset::GlobBuilder::new(glob)
        .case_insensitive(true)
        .build()
        .map(|g| g.compile_matcher().is_match(name))
        .unwrap_or(false)
}

/// Why a hook's answer could not be used.
#[derive(Debug, thiserror::Error)]
enum HookError {
    #[error("could not start it: {0}")]
    Spawn(std::io::Error),
    #[error("it ran longer than {0:?} and was killed")]
    Timeout(Duration),
    #[error("it exited with {status}{stderr}")]
    Exit { status: String, stderr: String },
    #[error("its output is not a JSON object: {0}")]
    Garbage(String),
    #[error("cancelled")]
    Cancelled,
    #[error("{0}")]
    Io(std::io::Error),
}

/// Runs one hook with `input` on stdin, in `confine` if given; an empty
/// stdout is an empty answer.
async fn run(
    hook: &HookConfig,
    cwd: &Path,
    input: &Value,
    cancel: &CancellationToken,
    confine: Option<&crate::tools::sandbox::Confinement>,
) -> Result<Map<String, Value>, HookError> {
    let timeout = Duration::from_secs_f64(
        hook.timeout
            .filter(|t| t.is_finite() && *t > 0.0)
            .unwrap_or(DEFAULT_TIMEOUT_SECS),
    );
    crate::tools::shell::start_reaping();
    let sh_args = vec!["-c".to_string(), hook.command.clone()];
    let (program, args) = match confine {
        Some(confine) => confine.command("sh", &sh_args),
        None => ("sh".to_string(), sh_args),
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env("PINCER_HOOK_EVENT", hook.event.id())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    crate::process_group::isolate(&mut command);
    let mut child = command.spawn().map_err(HookError::Spawn)?;
    let pgid = child.id();
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let body = serde_json::to_vec(input).unwrap_or_default();
    let work = async {
        if let Some(mut stdin) = stdin.take() {
            // A hook that does not read its input is fine.
            let _ = stdin.write_all(&body).await;
            let _ = stdin.write_all(b"\n").await;
        }
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(s) = stdout.as_mut() {
                let _ = s
                    .take(MAX_ANSWER_BYTES as u64 + 1)
                    .read_to_end(&mut out)
                    .await;
            }
        };
        let read_err = async {
            if let Some(s) = stderr.as_mut() {
                let _ = s.take(4096).read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await.map_err(HookError::Io)?;
        Ok::<_, HookError>((status, out, err))
    };
    let outcome = tokio::select! {
        result = tokio::time::timeout(timeout, work) => match result {
            Ok(result) => result,
            Err(_) => Err(HookError::Timeout(timeout)),
        },
        () = cancel.cancelled() => Err(HookError::Cancelled),
    };
    if outcome.is_err()
        && let Some(pid) = pgid
    {
        // The hook's own children go with it.
        crate::process_group::signal_group(
            crate::process_group::Pid::from_raw(pid as i32),
            crate::process_group::Signal::SIGKILL,
        );
    }
    let (status, out, err) = outcome?;
    if !status.success() {
        let stderr = String::from_utf8_lossy(&err);
        let stderr = stderr.trim();
        return Err(HookError::Exit {
            status: status.to_string(),
            stderr: if stderr.is_empty() {
                String::new()
            } else {
                format!(": {stderr}")
            },
        });
    }
    let text = String::from_utf8_lossy(&out);
    let text = text.trim();
    if text.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) if out.len() <= MAX_ANSWER_BYTES => Ok(map),
        _ => Err(HookError::Garbage(text.chars().take(200).collect())),
    }
}

#[cfg(test)]
mod tests;
