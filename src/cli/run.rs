//! `pincer run "prompt"`: one prompt, headless, in the current directory.
//!
//! Without `--json` the answer streams to stdout as plain text and tool
//! activity goes to stderr. With `--json` stdout carries exactly the
//! `session/update` notifications an editor would receive, then the prompt's
//! result, one JSON object per line. Nobody can be asked for permission, so
//! `--mode` decides in advance what may run.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{PromptResponse, SessionNotification};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::acp::updates;
use crate::agent::{self, AgentEvent, AgentHost, Answer, Mode, RunStop};
use crate::config::Settings;
use crate::llm::{Content, ToolCall};
use crate::tools::{self, CallInfo, Display};

/// What a headless run may do without asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RunMode {
    /// Read and search only; anything that would need permission is refused.
    #[value(alias = "plan")]
    ReadOnly,
    /// File edits inside the project are allowed; commands are refused.
    AcceptEdits,
    /// Everything is allowed.
    Bypass,
}

impl RunMode {
    fn mode(self) -> Mode {
        match self {
            RunMode::ReadOnly => Mode::Plan,
            RunMode::AcceptEdits => Mode::AcceptEdits,
            RunMode::Bypass => Mode::Bypass,
        }
    }
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub prompt: String,
    pub model: Option<String>,
    pub json: bool,
    pub mode: RunMode,
    /// `--trust`: trust the project's configuration for this run. Without
    /// it a headless run never trusts a project it was not told to.
    pub trust: bool,
    /// `--append-system-prompt`: instructions after the project's context,
    /// as an editor's `systemPrompt` in `append` mode.
    pub append_system_prompt: Option<String>,
}

/// Runs the prompt; the result is the process exit code.
pub async fn run(options: RunOptions) -> anyhow::Result<i32> {
    let cwd = std::env::current_dir()?;
    let settings = Settings::load_from_process_with(&cwd, options.trust)?;
    super::report_project(&settings);
    let model = settings.default_model(options.model.as_deref())?;
    if !settings.has_credentials(&model) {
        eprintln!("pincer: {}", settings.credential_hint(&model));
        return Ok(2);
    }
    let tools = tools::builtin_with(std::sync::Arc::new(tools::shell::ShellEnv::from_config(
        &settings.config,
    )));
    // The configured MCP servers take part too; their failures go to
    // stderr.
    let mcp_config = &settings.config.mcp;
    let mcp =
        crate::mcp::Manager::start(settings.mcp_specs(&cwd, &[]), mcp_config.startup_timeout());
    if let Some(mut events) = mcp.take_events() {
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                eprintln!("pincer: {}", event.text);
            }
        });
    }
    mcp.ready().await;
    // Remembered "always" answers of the project apply; nothing new is
    // remembered, since nobody is asked.
    let permissions = Arc::new(settings.permissions(options.mode.mode(), vec![cwd.clone()]));
    let sources = settings.sources(&cwd);
    let session_id = format!("run_{}", uuid::Uuid::new_v4().simple());
    let guard = settings.tool_guard(&model, settings.loop_detector(), &session_id, &cwd)?;
    let offered: Vec<Arc<dyn crate::tools::Tool>> = tools
        .iter()
        .chain(mcp.tools_now().iter())
        .filter(|t| guard.offers(t.as_ref(), permissions.mode()))
        .cloned()
        .collect();
    let appended = options
        .append_system_prompt
        .as_deref()
        .filter(|text| !text.trim().is_empty())
        .map(crate::context::ClientPrompt::append);
    let system_prompt =
        crate::context::system_prompt_with(&sources, &model, &offered, appended.as_ref());
    for problem in &system_prompt.problems {
        tracing::warn!("{problem}");
    }
    let mut config = settings.agent_config(
        model,
        settings.thinking(),
        system_prompt.text,
        permissions,
        Arc::new(guard),
    );
    config.extra_tools = Some(mcp.clone());
    let http = crate::llm::http_client()?;
    let cancel = CancellationToken::new();
    let ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    let host = PrintHost {
        session_id,
        json: options.json,
        cost: Mutex::new(0.0),
        ended_with_newline: Mutex::new(true),
    };
    let mut history = Vec::new();
    let stop = agent::run(
        &http,
        &config,
        &tools,
        &cwd,
        &mut history,
        vec![Content::text(options.prompt)],
        &host,
        &cancel,
    )
    .await;
    mcp.shutdown().await;
    let mut out = std::io::stdout().lock();
    if !options.json && !*lock(&host.ended_with_newline) {
        writeln!(out)?;
    }
    let code = match updates::stop_reason(&stop) {
        Some(reason) => {
            if options.json {
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&PromptResponse::new(reason))?
                )?;
            }
            match stop {
                RunStop::EndTurn => 0,
                RunStop::MaxTokens => {
                    eprintln!("pincer: the answer was cut off at the model's output limit");
                    3
                }
                RunStop::Refusal => {
                    eprintln!("pincer: the model refused to answer");
                    4
                }
                RunStop::Cancelled => {
                    eprintln!("pincer: cancelled");
                    130
                }
                RunStop::MaxTurns => {
                    eprintln!(
                        "pincer: stopped after {} model calls (max_turns in config.toml)",
                        config.max_turns
                    );
                    5
                }
                RunStop::LoopDetected(text) => {
                    eprintln!("pincer: {text}");
                    6
                }
                RunStop::Blocked(reason) => {
                    eprintln!("pincer: the prompt was refused by a hook: {reason}");
                    7
                }
                RunStop::Failed(_) => 1,
            }
        }
        None => {
            let message = match &stop {
                // Which credential was turned down, and how to replace it.
                RunStop::Failed(error @ crate::llm::LlmError::Auth { .. }) => format!(
                    "{}. {}",
                    error.to_string().trim_end_matches('.'),
                    settings.credential_hint(&config.model)
                ),
                RunStop::Failed(error) => error.to_string(),
                other => format!("{other:?}"),
            };
            if options.json {
                let error = serde_json::json!({ "error": { "message": message } });
                writeln!(out, "{error}")?;
            }
            eprintln!("pincer: {message}");
            1
        }
    };
    out.flush()?;
    Ok(code)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct PrintHost {
    session_id: String,
    json: bool,
    cost: Mutex<f64>,
    ended_with_newline: Mutex<bool>,
}

impl AgentHost for PrintHost {
    fn emit(&self, event: AgentEvent) {
        if let AgentEvent::MessageEnd(message) = &event {
            *lock(&self.cost) += message.usage.cost.total;
        }
        if self.json {
            let cost = *lock(&self.cost);
            // Printed as a client without plan operations gets it.
            let plan = updates::plan_update(&event, false);
            for update in updates::session_update(&event, cost)
                .into_iter()
                .chain(plan)
            {
                let notification = SessionNotification::new(self.session_id.clone(), update);
                let line = serde_json::json!({
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": notification,
                });
                let mut out = std::io::stdout().lock();
                // A closed pipe (`| head`) is not worth a panic.
                let _ = writeln!(out, "{line}");
            }
            return;
        }
        match event {
            AgentEvent::TextDelta(text) => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                *lock(&self.ended_with_newline) = text.ends_with('\n');
            }
            AgentEvent::ToolExecutionStart { info, .. } => eprintln!("→ {}", info.title),
            AgentEvent::ToolExecutionEnd { output, .. } if output.is_error => {
                eprintln!("  ✗ {}", output.text());
            }
            AgentEvent::Retry { error, delay, .. } => {
                eprintln!("pincer: {error}; retrying in {:.1} s", delay.as_secs_f64());
            }
            _ => {}
        }
    }

    fn request_permission<'a>(
        &'a self,
        _call: &'a ToolCall,
        _info: &'a CallInfo,
        reason: &'a str,
        _preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer> {
        // Nobody can be asked; the mode already allowed what it allows.
        if !self.json {
            eprintln!("  refused ({reason}); pass --mode to allow more");
        }
        Box::pin(async { Answer::RejectOnce })
    }
}
