//! The Claude Code runtime: a session's turns run through the user's own
//! `claude` CLI, while pincer keeps the session, the editor protocol, its
//! tools, policy, hooks and permissions.
//!
//! One long-lived `claude -p --input-format stream-json --output-format
//! stream-json` process per session ([`process`]) gets each prompt as a
//! user line. It has none of its own tools: pincer's tools reach it as an
//! in-process MCP server ([`crate::mcp::server`]) tunnelled through the
//! CLI's control protocol, and its permission prompts come to pincer on
//! the same pipes (`--permission-prompt-tool stdio`). Every call the
//! model makes therefore runs through [`super::run_tool_call`], the path
//! of pincer's own loop. What the CLI streams becomes the same
//! [`AgentEvent`]s and history entries the native loop produces
//! ([`turn`]).
//!
//! The Claude Code session id is recorded in the transcript
//! ([`AgentEvent::Runtime`]) and resumed (`--resume`) when the process
//! has to be started again. When the CLI cannot answer before anything
//! was shown (missing, not logged in, rate limited, failing at once) the
//! turn goes to pincer's own loop with a notice ([`super::Fallback`]); a
//! session the CLI no longer knows is replaced by a new one once; a
//! context overflow is retried only after Claude Code compacted.
//!
//! pincer never reads the CLI's credentials or uses them for its own
//! calls: all model traffic of this runtime is the CLI's own.

mod process;
mod turn;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{AgentEvent, AgentMessage, Fallback, Run, RunStop, Runtime};
use crate::llm::{LlmError, Model, Secret};
use process::{Key, Process};

/// The name the transcript records for this runtime.
pub const RUNTIME: &str = "claude-code";

/// How to run Claude Code for a model, and what answers when it cannot.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The CLI (resolved on `PATH` when configured by name).
    pub path: PathBuf,
    /// The model pincer's own loop uses when Claude Code cannot answer.
    pub native: Model,
    pub native_key: Option<Secret>,
    pub native_profile: Option<String>,
}

/// A session's Claude Code state, shared by its runs: the process and the
/// Claude Code session it continues.
#[derive(Debug, Default)]
pub struct Session {
    inner: tokio::sync::Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    process: Option<Process>,
    /// The Claude Code session to resume when a process starts.
    resume: Option<String>,
    /// How much of pincer's history that session has seen (the history's
    /// length after its last run); messages after it are sent along with
    /// the next prompt. `None`: unknown, taken as everything.
    synced: Option<usize>,
}

impl Session {
    /// A session continuing the Claude Code session `resume` (from the
    /// transcript), which had seen `synced` entries of the history.
    pub fn new(resume: Option<String>, synced: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            inner: tokio::sync::Mutex::new(Inner {
                process: None,
                resume,
                synced,
            }),
        })
    }
}

/// The runtime for one run: the settings of the model it runs, and the
/// session's state.
#[derive(Debug)]
pub struct ClaudeCode {
    settings: Settings,
    session: Arc<Session>,
}

impl ClaudeCode {
    pub fn new(settings: Settings, session: Arc<Session>) -> Self {
        Self { settings, session }
    }

    fn fallback(&self, why: &str) -> Fallback {
        Fallback {
            notice: format!(
                "Claude Code could not answer ({why}); pincer's own loop answers this turn with {}.",
                self.settings.native.full_id()
            ),
            model: self.settings.native.clone(),
            key: self.settings.native_key.clone(),
            auth_profile: self.settings.native_profile.clone(),
        }
    }

    async fn run_claude(
        &self,
        run: Run<'_>,
        history: &mut Vec<AgentMessage>,
    ) -> Result<RunStop, Fallback> {
        let mut inner = self.session.inner.lock().await;
        let prompt_at = wire::prompt_start(history);
        let prompt = history[prompt_at..].to_vec();
        let key = Key {
            program: self.settings.path.clone(),
            model: run.config.model.id.clone(),
            cwd: run.cwd.to_path_buf(),
            system_prompt: run.config.system_prompt.clone(),
            max_turns: run.config.max_turns,
        };
        let mut fresh_retry = false;
        let mut overflow_retry = false;
        loop {
            if let Some(process) = &mut inner.process
                && (process.key != key || !process.alive())
            {
                // Another model, prompt or folder: the same Claude Code
                // session goes on in a new process.
                inner.process = None;
            }
            if inner.process.is_none() {
                if process::logged_in(&key.program, &key.cwd).await == Some(false) {
                    run.host.emit(AgentEvent::Runtime {
                        runtime: super::NATIVE.to_string(),
                        resume: None,
                    });
                    return Err(self.fallback(
                        "it is not logged in: run `claude` and log in with /login, or give it an API key",
                    ));
                }
                let session_id = uuid::Uuid::new_v4().to_string();
                match Process::spawn(key.clone(), inner.resume.clone(), session_id) {
                    Ok(process) => inner.process = Some(process),
                    Err(e) => {
                        run.host.emit(AgentEvent::Runtime {
                            runtime: super::NATIVE.to_string(),
                            resume: None,
                        });
                        return Err(self.fallback(&e.to_string()));
                    }
                }
            }
            // What the Claude Code session has not seen of this
            // conversation goes with the prompt: everything for a new
            // session, what came since its last run for a resumed one.
            let catch_up = if overflow_retry {
                None
            } else {
                let seen = match inner.resume {
                    Some(_) => inner.synced.unwrap_or(prompt_at).min(prompt_at),
                    None => 0,
                };
                wire::catch_up(&history[seen..prompt_at])
            };
            let first = wire::user_line(&prompt, catch_up.as_deref());
            let Some(process) = inner.process.as_mut() else {
                continue;
            };
            let outcome = turn::drive(process, run, history, first).await;
            let session_id = process.session_id.clone();
            match outcome {
                turn::Outcome::Done(stop) => {
                    inner.resume = Some(session_id.clone());
                    inner.synced = Some(history.len());
                    run.host.emit(AgentEvent::Runtime {
                        runtime: RUNTIME.to_string(),
                        resume: Some(session_id),
                    });
                    if matches!(stop, RunStop::Cancelled | RunStop::Failed(_))
                        && let Some(process) = inner.process.as_mut()
                        && !process.alive()
                    {
                        inner.process = None;
                    }
                    return Ok(stop);
                }
                turn::Outcome::UnknownSession if !fresh_retry => {
                    fresh_retry = true;
                    tracing::info!(session = %session_id, "Claude Code no longer has this session; starting a new one");
                    run.host.emit(AgentEvent::Failover {
                        text: format!(
                            "Claude Code no longer has its session {session_id}; a new Claude Code session continues this conversation."
                        ),
                    });
                    inner.process = None;
                    inner.resume = None;
                    inner.synced = None;
                }
                turn::Outcome::UnknownSession => {
                    inner.process = None;
                    inner.resume = None;
                    inner.synced = None;
                    run.host.emit(AgentEvent::Runtime {
                        runtime: super::NATIVE.to_string(),
                        resume: None,
                    });
                    return Err(self.fallback("it could not start a session"));
                }
                turn::Outcome::Overflow { compacted } if compacted && !overflow_retry => {
                    // Claude Code compacted meanwhile: one more try, in
                    // the session that now holds the prompt.
                    overflow_retry = true;
                    inner.resume = Some(session_id);
                }
                turn::Outcome::Overflow { .. } => {
                    inner.resume = Some(session_id.clone());
                    run.host.emit(AgentEvent::Runtime {
                        runtime: RUNTIME.to_string(),
                        resume: Some(session_id),
                    });
                    return Ok(RunStop::Failed(LlmError::ContextOverflow {
                        provider: run.config.model.provider.clone(),
                        message: format!(
                            "the conversation is too long for {} and Claude Code did not compact it. Start a new session, or switch to a model with a larger window.",
                            run.config.model.full_id()
                        ),
                    }));
                }
                turn::Outcome::Unavailable(why) => {
                    // Whatever the CLI took in of this prompt stays in its
                    // session; the next run sends what it missed.
                    inner.process = None;
                    run.host.emit(AgentEvent::Runtime {
                        runtime: super::NATIVE.to_string(),
                        resume: None,
                    });
                    return Err(self.fallback(&why));
                }
            }
        }
    }
}

impl Runtime for ClaudeCode {
    fn run<'a>(
        &'a self,
        run: Run<'a>,
        history: &'a mut Vec<AgentMessage>,
    ) -> BoxFuture<'a, Result<RunStop, Fallback>> {
        Box::pin(self.run_claude(run, history))
    }

    /// A new Claude Code conversation in a process of its own, ended when
    /// the runtime is dropped.
    fn detached(&self) -> Option<Arc<dyn Runtime>> {
        Some(Arc::new(ClaudeCode::new(
            self.settings.clone(),
            Session::new(None, None),
        )))
    }
}

#[cfg(test)]
#[path = "claude_code/tests.rs"]
mod tests;
