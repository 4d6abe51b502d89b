//! `pincer run`: one prompt, headless, for scripts and terminals.
//!
//! The prompt comes from the argument, stdin or both ([`input`]). Each run
//! is a session like an editor's: its transcript is saved under the data
//! dir, `pincer sessions list` shows it, and `--continue` / `--resume`
//! carry it on. Nobody can be asked for permission, so `--mode` decides in
//! advance what may run. What is printed depends on `--output-format`
//! ([`output`]); the exit code says how the run ended ([`exit`]).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod helpers;
mod input;
mod markdown;
mod output;
mod overrides;
mod resume;
mod terminal;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::{self, Mode, RunStop};
use crate::config::Settings;
use crate::llm::Content;
use crate::session::transcript;
use crate::tools;
pub use output::{OutputFormat, Verbosity};
pub(crate) use output::{PrintHost, print_line, usage_json};
use resume::{choose_model, locate, record_unanswered};

/// The exit codes of `pincer run`, distinct so that a script can tell a
/// usage mistake from missing credentials from a model that failed.
pub mod exit {
    /// The model answered and the run ended normally.
    pub const SUCCESS: i32 = 0;
    /// The provider or model failed (network, HTTP error, bad stream).
    pub const FAILED: i32 = 1;
    /// The command line was wrong: an unknown flag, an empty prompt, a bad
    /// `-c`, an unknown session. (clap uses 2 for its own errors too.)
    pub const USAGE: i32 = 2;
    /// The answer was cut off at the model's output limit.
    pub const MAX_TOKENS: i32 = 3;
    /// The model refused to answer.
    pub const REFUSED: i32 = 4;
    /// The run stopped after `--max-turns` model calls.
    pub const MAX_TURNS: i32 = 5;
    /// The loop detector stopped a run going round in circles.
    pub const LOOP: i32 = 6;
    /// A `user_prompt_submit` hook refused the prompt.
    pub const BLOCKED: i32 = 7;
    /// No credentials for the model's provider, or the provider rejected
    /// them.
    pub const CREDENTIALS: i32 = 8;
    /// Interrupted (Ctrl-C / SIGINT), as shells report 128 + SIGINT.
    pub const CANCELLED: i32 = 130;
}

/// The exit codes for `pincer run --help`.
pub const EXIT_CODES_HELP: &str = "Exit codes:
  0    success
  1    the provider or model failed (network, HTTP error, broken stream)
  2    usage error (bad flag, empty prompt, bad -c key=value, unknown or ambiguous session id)
  3    the answer was cut off at the model's output limit
  4    the model refused
  5    --max-turns (max_turns) reached
  6    stopped by the loop detector
  7    the prompt was refused by a hook
  8    no credentials for the provider, or the provider rejected them
  130  cancelled (Ctrl-C / SIGINT)";

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

/// Which stored session a run carries on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Continue {
    /// A new session.
    New,
    /// `--continue`: the most recent session of the working directory.
    Latest,
    /// `--resume ID`: an id or a unique prefix of one.
    Id(String),
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The argument; `-` (or none) reads stdin.
    pub prompt: Option<String>,
    pub model: Option<String>,
    pub format: OutputFormat,
    pub verbosity: Verbosity,
    pub mode: RunMode,
    /// `--trust`: trust the project's configuration for this run. Without
    /// it a headless run never trusts a project it was not told to.
    pub trust: bool,
    /// `--append-system-prompt`: instructions after the project's context,
    /// as an editor's `systemPrompt` in `append` mode.
    pub append_system_prompt: Option<String>,
    pub cwd: Option<PathBuf>,
    pub session: Continue,
    pub max_turns: Option<u32>,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    /// `-c key=value`.
    pub overrides: Vec<String>,
}

/// Why a run ended before (or instead of) an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Credentials(String),
    #[error("{0:#}")]
    Other(anyhow::Error),
}

impl Failure {
    pub(crate) fn code(&self) -> i32 {
        match self {
            Failure::Usage(_) => exit::USAGE,
            Failure::Credentials(_) => exit::CREDENTIALS,
            Failure::Other(_) => exit::FAILED,
        }
    }

    pub(crate) fn subtype(&self) -> &'static str {
        match self {
            Failure::Usage(_) => "error_usage",
            Failure::Credentials(_) => "error_credentials",
            Failure::Other(_) => "error_during_execution",
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

/// Runs the prompt; the result is the process exit code. Every outcome,
/// errors included, is reported in the chosen output format.
pub async fn run(options: RunOptions) -> i32 {
    let started = Instant::now();
    match execute(&options, started).await {
        Ok(code) => code,
        Err(failure) => {
            let message = failure.to_string();
            if options.format == OutputFormat::Text {
                eprintln!("pincer: {message}");
            } else {
                print_line(&json!({
                    "type": "result",
                    "subtype": failure.subtype(),
                    "is_error": true,
                    "exit_code": failure.code(),
                    "error": message,
                    "session_id": null,
                    "duration_ms": started.elapsed().as_millis() as u64,
                }));
            }
            failure.code()
        }
    }
}

async fn execute(options: &RunOptions, started: Instant) -> Result<i32, Failure> {
    let piped = tokio::task::spawn_blocking(input::read_piped_stdin)
        .await
        .map_err(|e| Failure::Other(e.into()))?
        .map_err(Failure::Usage)?;
    let prompt =
        input::compose(options.prompt.as_deref(), piped.as_deref()).map_err(Failure::Usage)?;
    if let Some(travel) = crate::session::rewind::Travel::parse(&prompt) {
        return time_travel(options, travel.map_err(Failure::Usage)?);
    }
    let Prepared {
        settings,
        cwd,
        session_id,
        tools,
        mcp,
        config,
        host,
        http,
        cancel,
        restored,
        ..
    } = prepare(options, &json!({}), &mut |settings, model, _| {
        check_credentials(settings, model)
    })
    .await?;
    let content = vec![Content::text(prompt)];
    // The time line the model reads with the prompt is stored with it, so
    // that a `--continue` sends the same bytes and the prompt cache holds.
    let time = agent::time_line(&config);
    host.record_prompt(transcript::Record::Message {
        message: crate::llm::Message::User {
            content: content.clone(),
        },
        time: Some(time.clone()),
    });
    let mut history = restored.map(|r| r.history).unwrap_or_default();
    let stop = agent::run_timed(
        &http,
        &config,
        &tools,
        &cwd,
        &mut history,
        content,
        time,
        &host,
        &cancel,
    )
    .await;
    host.terminal.quiet();
    mcp.shutdown().await;
    record_unanswered(&host, &history, &config.model, &stop);
    if let RunStop::LoopDetected(text) | RunStop::Blocked(text) = &stop {
        host.record(transcript::Record::Notice { text: text.clone() });
    }
    if options.format == OutputFormat::Text && !*host.ended_with_newline.lock() {
        println!();
    }
    let (code, subtype, message) = outcome(&stop, &settings, &config);
    let tally = host.tally.lock();
    let duration_ms = started.elapsed().as_millis() as u64;
    match options.format {
        OutputFormat::Text => {
            if let Some(message) = &message {
                eprintln!("pincer: {message}");
            }
            if options.verbosity == Verbosity::Verbose || host.terminal.interactive {
                let closing = format!(
                    "pincer: {} model call{}, {} tokens in, {} out, ${:.4}, {:.1} s",
                    tally.turns,
                    if tally.turns == 1 { "" } else { "s" },
                    tally.usage.input + tally.usage.cache_read + tally.usage.cache_write,
                    tally.usage.output,
                    tally.cost,
                    duration_ms as f64 / 1000.0
                );
                eprintln!("{}", host.terminal.dim(&closing));
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let mut result = json!({
                "type": "result",
                "subtype": subtype,
                "is_error": code != exit::SUCCESS,
                "exit_code": code,
                "stop_reason": crate::acp::updates::stop_reason(&stop),
                "result": tally.final_text,
                "session_id": session_id,
                "model": config.model.full_id(),
                "cwd": cwd,
                "num_turns": tally.turns,
                "duration_ms": duration_ms,
                "total_cost_usd": tally.cost,
                "usage": usage_json(&tally.usage),
            });
            if let (Some(message), Value::Object(map)) = (message, &mut result) {
                map.insert("error".into(), Value::String(message));
            }
            print_line(&result);
        }
    }
    Ok(code)
}

/// `/undo`, `/redo`, `/rewind [N]` as the prompt of a continued session:
/// no model is called. Nobody is asked: files changed since the turns are
/// kept and reported, never overwritten (`pincer sessions rewind
/// --overwrite` can).
fn time_travel(
    options: &RunOptions,
    travel: Option<crate::session::rewind::Travel>,
) -> Result<i32, Failure> {
    let (_, resumed) = locate(options)?;
    let Some(resumed) = resumed else {
        return Err(Failure::Usage(
            "/undo, /redo and /rewind act on a stored session: pass --continue or --resume ID"
                .into(),
        ));
    };
    let text = match travel {
        None => {
            crate::session::rewind::list(&crate::session::restore(resumed.loaded.entries).turns)
        }
        Some(travel) => {
            crate::cli::sessions::travel_stored(&resumed.path, &travel, &mut |_, _| {
                Ok(Some(false))
            })?
        }
    };
    match options.format {
        OutputFormat::Text => println!("{}", text.trim_end()),
        OutputFormat::Json | OutputFormat::StreamJson => print_line(&json!({
            "type": "result",
            "subtype": "success",
            "is_error": false,
            "exit_code": exit::SUCCESS,
            "result": text,
            "session_id": resumed.loaded.header.id,
            "num_turns": 0,
            "total_cost_usd": 0.0,
        })),
    }
    Ok(exit::SUCCESS)
}

/// What a run checks with the settings, the model and the continued
/// session before it starts a transcript.
pub(crate) type Check<'a> = dyn FnMut(&Settings, &crate::llm::Model, Option<&crate::session::Restored>) -> Result<(), Failure>
    + 'a;

/// The model's provider has credentials.
pub(crate) fn check_credentials(
    settings: &Settings,
    model: &crate::llm::Model,
) -> Result<(), Failure> {
    if settings.has_credentials(model) {
        Ok(())
    } else {
        Err(Failure::Credentials(settings.credential_hint(model)))
    }
}

/// A headless session ready to run: the settings with the command line's
/// overrides, the model with its credentials, the tools, MCP servers,
/// policy and permissions of `--mode`, the transcript (new, or the one
/// continued) and the host that prints and records. The `stream-json`
/// start event is printed, with `init` added to it.
pub(crate) struct Prepared {
    pub settings: Settings,
    pub cwd: PathBuf,
    pub session_id: String,
    pub tools: Vec<Arc<dyn crate::tools::Tool>>,
    pub mcp: Arc<crate::mcp::Manager>,
    pub config: agent::AgentConfig,
    pub host: PrintHost,
    pub http: reqwest::Client,
    pub cancel: CancellationToken,
    /// The continued session's state.
    pub restored: Option<crate::session::Restored>,
}

pub(crate) async fn prepare(
    options: &RunOptions,
    init: &Value,
    check: &mut Check<'_>,
) -> Result<Prepared, Failure> {
    let (cwd, resumed) = locate(options)?;
    let mut settings = Settings::load_from_process_with(&cwd, options.trust)
        .map_err(|e| Failure::Other(e.into()))?;
    overrides::apply(&mut settings.config, &options.overrides).map_err(Failure::Usage)?;
    if let Some(n) = options.max_turns {
        settings.config.max_turns = Some(n);
    }
    // Overrides may change providers; the catalog follows them.
    let env = settings.clone();
    settings.catalog = crate::llm::catalog::Catalog::new(&settings.config.providers, &|k: &str| {
        env.env(k).map(str::to_string)
    });
    super::report_project(&settings);

    let restored = resumed
        .as_ref()
        .map(|r| crate::session::restore(r.loaded.entries.clone()));
    let model = choose_model(&settings, options, restored.as_ref())?;
    check(&settings, &model, restored.as_ref())?;

    let mut tools = tools::builtin_with(Arc::new(settings.config.shell_env()));
    let allowed = overrides::tool_list(&options.allowed_tools);
    let disallowed = overrides::tool_list(&options.disallowed_tools);
    let known: Vec<&str> = tools
        .iter()
        .map(|t| t.name())
        .chain([agent::subagent::TASK])
        .collect();
    overrides::check_tool_names("--allowed-tools", &allowed, &known).map_err(Failure::Usage)?;
    overrides::check_tool_names("--disallowed-tools", &disallowed, &known)
        .map_err(Failure::Usage)?;

    let (session_id, writer) = match &resumed {
        Some(r) => (
            r.loaded.header.id.clone(),
            transcript::Writer::append_to(&r.path, &r.loaded)
                .map_err(|e| Failure::Other(e.into()))?,
        ),
        None => {
            let id = format!("sess_{}", uuid::Uuid::new_v4().simple());
            let path = crate::session::transcript_path(&settings.paths.data_dir, &cwd, &id);
            let header = transcript::Header::new(id.clone(), cwd.clone(), None);
            let writer =
                transcript::Writer::create(&path, &header).map_err(|e| Failure::Other(e.into()))?;
            (id, writer)
        }
    };

    let policy = crate::agent::setup::tool_policy(&settings, &model)
        .and_then(|p| p.narrowed(&allowed, &disallowed))
        .map_err(|e| Failure::Usage(format!("tool policy: {e}")))?;
    // Remembered "always" answers of the project apply; nothing new is
    // remembered, since nobody is asked.
    let permissions = Arc::new(crate::agent::setup::permissions(
        &settings,
        options.mode.mode(),
        vec![cwd.clone()],
    ));
    if let Some(sandbox) = permissions.sandbox() {
        sandbox.set_model(&model.provider, &model.id);
    }
    let guard = crate::agent::guard::ToolGuard::new(
        policy,
        crate::agent::setup::loop_detector(&settings),
        crate::agent::hooks::Hooks::new(settings.config.hooks.clone())
            .with_sandbox(permissions.sandbox().cloned()),
        &session_id,
        &cwd,
    );

    // The configured MCP servers take part too, in the run's sandbox;
    // their failures go to stderr.
    let mcp_config = &settings.config.mcp;
    let mcp = crate::mcp::Manager::start(
        crate::mcp::confine(
            settings.mcp_specs(&cwd, &[]),
            permissions.sandbox().map(|s| s.as_ref()),
            mcp_config,
        ),
        vec![cwd.clone()],
        mcp_config.startup_timeout(),
    );
    if let Some(mut events) = mcp.take_events() {
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                eprintln!("pincer: {}", event.text);
            }
        });
    }
    mcp.ready().await;
    let http = crate::llm::http_client().map_err(|e| Failure::Other(e.into()))?;
    // Helpers (`task`), unless the run's model is Claude Code's, which
    // has its own.
    let tally = Arc::new(parking_lot::Mutex::new(output::Tally::default()));
    let subagents = crate::agent::setup::claude_code_runtime(&settings, &model)
        .is_none()
        .then(|| {
            crate::agent::setup::subagents(
                &Arc::new(settings.clone()),
                &cwd,
                &http,
                Arc::new(helpers::RunChildren {
                    data_dir: settings.paths.data_dir.clone(),
                    cwd: cwd.clone(),
                    parent: session_id.clone(),
                    format: options.format,
                    verbosity: options.verbosity,
                    tally: tally.clone(),
                }),
                None,
            )
        })
        .flatten();
    if let Some(subagents) = &subagents {
        tools.push(Arc::new(agent::subagent::TaskTool::new(
            &subagents.definitions,
            false,
        )));
    }
    let offered: Vec<Arc<dyn crate::tools::Tool>> = tools
        .iter()
        .chain(mcp.tools_now().iter())
        .filter(|t| guard.offers(t.as_ref(), permissions.mode()))
        .cloned()
        .collect();
    // This run's instructions, else those the session was given before.
    let client_prompt = options
        .append_system_prompt
        .as_deref()
        .filter(|text| !text.trim().is_empty())
        .map(crate::context::ClientPrompt::append);
    let stored_prompt = restored.as_ref().and_then(|r| r.client_prompt.clone());
    let system_prompt = crate::context::system_prompt_with(
        &crate::context::Sources::from_settings(&settings, &cwd),
        &model,
        &offered,
        client_prompt.as_ref().or(stored_prompt.as_ref()),
    );
    for problem in &system_prompt.problems {
        tracing::warn!("{problem}");
    }
    let mut config = crate::agent::setup::agent_config(
        &settings,
        model.clone(),
        settings.thinking(),
        system_prompt.text,
        permissions,
        Arc::new(guard),
    );
    config.extra_tools = Some(mcp.clone());
    config.subagents = subagents;
    config.session_id = Some(session_id.clone());
    config.checkpoints = crate::agent::setup::checkpoints(&settings, &cwd);
    config.last_call = restored.as_ref().and_then(|r| r.last_call);
    let (resume, synced) = restored
        .as_ref()
        .and_then(|r| r.claude_code.clone())
        .unzip();
    crate::agent::setup::use_claude_code(
        &settings,
        &mut config,
        crate::agent::claude_code::Session::new(resume, synced),
    );
    let cancel = CancellationToken::new();
    watch_signals(cancel.clone()).map_err(|e| Failure::Other(e.into()))?;

    let mut host = PrintHost::new(
        session_id.clone(),
        options.format,
        options.verbosity,
        writer,
    );
    host.tally = tally;
    if resumed.is_none()
        || restored.as_ref().and_then(|r| r.model.as_deref()) != Some(&model.full_id())
    {
        host.record(transcript::Record::ModelChange {
            model: model.full_id(),
        });
    }
    if let Some(prompt) = client_prompt
        && Some(&prompt) != stored_prompt.as_ref()
    {
        host.record(transcript::Record::SystemPrompt { prompt });
    }
    let tool_names: Vec<String> = offered.iter().map(|t| t.name().to_string()).collect();
    match options.format {
        OutputFormat::StreamJson => {
            let mut start = json!({
                "type": "system",
                "subtype": "init",
                "session_id": session_id,
                "model": model.full_id(),
                "cwd": cwd,
                "tools": tool_names,
                "mode": options.mode.mode().id(),
                "resumed": resumed.is_some(),
            });
            if let (Value::Object(start), Value::Object(more)) = (&mut start, init) {
                start.extend(more.clone());
            }
            print_line(&start);
        }
        OutputFormat::Text if options.verbosity == Verbosity::Verbose => eprintln!(
            "pincer: session {session_id} · {} · {}",
            model.full_id(),
            cwd.display()
        ),
        _ => {}
    }
    Ok(Prepared {
        settings,
        cwd,
        session_id,
        tools,
        mcp,
        config,
        host,
        http,
        cancel,
        restored,
    })
}

/// Ctrl-C (and, on Unix, SIGTERM) cancels the run: the model call stops,
/// child processes are killed, the transcript records the end, and the
/// exit code is 130. The handlers are registered before this returns, so
/// a signal that comes early is not lost.
pub(crate) fn watch_signals(cancel: CancellationToken) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::spawn(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            cancel.cancel();
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    Ok(())
}

/// The exit code, the result's subtype, and what the person is told.
fn outcome(
    stop: &RunStop,
    settings: &Settings,
    config: &agent::AgentConfig,
) -> (i32, &'static str, Option<String>) {
    match stop {
        RunStop::EndTurn => (exit::SUCCESS, "success", None),
        RunStop::MaxTokens => (
            exit::MAX_TOKENS,
            "error_max_tokens",
            Some("the answer was cut off at the model's output limit".into()),
        ),
        RunStop::Refusal => (
            exit::REFUSED,
            "error_refusal",
            Some("the model refused to answer".into()),
        ),
        RunStop::Cancelled => (exit::CANCELLED, "error_cancelled", Some("cancelled".into())),
        RunStop::MaxTurns => (
            exit::MAX_TURNS,
            "error_max_turns",
            Some(format!(
                "stopped after {} model calls (--max-turns, or max_turns in config.toml)",
                config.max_turns
            )),
        ),
        RunStop::LoopDetected(text) => (exit::LOOP, "error_loop_detected", Some(text.clone())),
        RunStop::Blocked(reason) => (
            exit::BLOCKED,
            "error_blocked",
            Some(format!("the prompt was refused by a hook: {reason}")),
        ),
        // Which credential was turned down, and how to replace it.
        RunStop::Failed(error @ crate::llm::LlmError::Auth { .. }) => (
            exit::CREDENTIALS,
            "error_credentials",
            Some(format!(
                "{}. {}",
                error.to_string().trim_end_matches('.'),
                settings.credential_hint(&config.model)
            )),
        ),
        RunStop::Failed(error) => (
            exit::FAILED,
            "error_during_execution",
            Some(error.to_string()),
        ),
    }
}
