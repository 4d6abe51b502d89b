//! Building a run's agent objects from the settings: the [`AgentConfig`],
//! the tool policy and guard, the permission state, the loop history, the
//! clock, and the Claude Code runtime when a model's provider runs there.
//!
//! The settings (`crate::config`) only say what the config files and the
//! environment say; the agent's objects are made here, in the layer whose
//! objects they are, so that config knows nothing of the agent. Each
//! function is what a front door (ACP, `pincer run`, the gateway) calls
//! once per session or per run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::guard::ToolGuard;
use super::hooks::Hooks;
use super::loops::{LoopDetector, SharedLoops};
use super::permission::{Sensitive, state_file};
use super::policy::{PolicyError, ToolPolicy};
use super::{AgentConfig, Mode, Permissions, claude_code, clock, compaction, prune};
use crate::config::{CacheTtl, DEFAULT_MAX_RETRIES, Settings};
use crate::llm::{Model, StreamConfig, ThinkingLevel};

/// How a run reaches `model`, with the settings' limits and retries.
pub fn agent_config(
    settings: &Settings,
    model: Model,
    thinking: ThinkingLevel,
    system_prompt: String,
    permissions: Arc<Permissions>,
    guard: Arc<ToolGuard>,
) -> AgentConfig {
    let config = &settings.config;
    AgentConfig {
        key: settings.api_key(&model),
        auth_profile: settings.credential_source(&model),
        model,
        thinking,
        system_prompt,
        max_turns: settings.max_turns(),
        stream: StreamConfig {
            idle_timeout: Duration::from_secs(config.stream_idle_timeout.unwrap_or(120)),
        },
        max_retries: config.max_retries.unwrap_or(DEFAULT_MAX_RETRIES),
        retry_base_delay: Duration::from_millis(config.retry_base_delay_ms.unwrap_or(2000)),
        permissions,
        compaction: compaction(settings),
        memory_dir: config
            .compaction
            .memory_flush
            .unwrap_or(true)
            .then(|| settings.paths.workspace_dir()),
        prune: prune(settings),
        last_call: None,
        credentials: Some(Arc::new(settings.credentials())),
        fallbacks: settings.fallback_models(),
        rotate_rate_limits: false,
        guard,
        clock: clock(settings),
        session_id: None,
        extra_tools: None,
        runtime: None,
        checkpoints: None,
        subagents: None,
    }
}

/// How a session in `cwd` starts helpers: the definitions the user (and
/// a trusted project) wrote, the `[subagents]` limits, and `children`,
/// where the frontend keeps them. `None` when `max_depth = 0`.
pub fn subagents(
    settings: &Arc<Settings>,
    cwd: &Path,
    http: &reqwest::Client,
    children: Arc<dyn crate::agent::subagent::Children>,
    background: Option<Arc<dyn crate::agent::subagent::Background>>,
) -> Option<Arc<crate::agent::subagent::Subagents>> {
    use crate::agent::subagent::{Chosen, Subagents};
    let limits = settings.config.subagents;
    if limits.max_depth() == 0 {
        return None;
    }
    let sources = crate::context::Sources::from_settings(settings, cwd);
    let (definitions, problems) = crate::context::agents::discover(&sources);
    for problem in problems {
        tracing::warn!("{problem}");
    }
    let resolving = settings.clone();
    Some(Arc::new(Subagents {
        http: http.clone(),
        definitions: Arc::new(definitions),
        max_parallel: limits.max_parallel(),
        max_depth: limits.max_depth(),
        depth: 0,
        children,
        background,
        resolve: Arc::new(move |name: &str| {
            let model = resolving.catalog.resolve(name).map_err(|e| e.to_string())?;
            if !resolving.has_credentials(&model) {
                return Err(resolving.credential_hint(&model));
            }
            Ok(Chosen {
                key: resolving.api_key(&model),
                auth_profile: resolving.credential_source(&model),
                model,
            })
        }),
    }))
}

/// The checkpoints of a session working in `cwd`, as the config asks
/// (`None`: `[checkpoints] enabled = false`). Nothing is read until a run
/// first calls something that may change files.
pub fn checkpoints(
    settings: &Settings,
    cwd: &Path,
) -> Option<Arc<crate::checkpoint::recording::Recording>> {
    let config = &settings.config.checkpoints;
    config.enabled().then(|| {
        Arc::new(crate::checkpoint::recording::Recording::new(
            cwd,
            &crate::checkpoint::store_dir(&settings.paths.data_dir, &settings.project.root),
            config.limits(),
            config.max_files(),
        ))
    })
}

/// The pruning settings after config.
fn prune(settings: &Settings) -> prune::Settings {
    let defaults = prune::Settings::default();
    let config = &settings.config;
    prune::Settings {
        enabled: config.prune_tool_results.unwrap_or(defaults.enabled),
        ttl: config.cache_ttl.map_or(defaults.ttl, |CacheTtl(ttl)| ttl),
        ..defaults
    }
}

/// The compaction settings after config.
fn compaction(settings: &Settings) -> compaction::Settings {
    let defaults = compaction::Settings::default();
    let c = &settings.config.compaction;
    compaction::Settings {
        enabled: c.enabled.unwrap_or(defaults.enabled),
        reserve_tokens: c.reserve_tokens.unwrap_or(defaults.reserve_tokens),
        keep_recent_tokens: c.keep_recent_tokens.unwrap_or(defaults.keep_recent_tokens),
    }
}

/// The agent's clock: the system clock, or the instant in the file that
/// the hidden `PINCER_CLOCK_FILE` names (see [`clock`]; the prompt-cache
/// tests move time with it).
pub fn clock(settings: &Settings) -> clock::Clock {
    clock::Clock::from_env_value(settings.env(clock::CLOCK_FILE_VAR))
}

/// The tool policy for `model`: the user's `[tools]`, the project's, and
/// the `main` agent's rules.
pub fn tool_policy(settings: &Settings, model: &Model) -> Result<ToolPolicy, PolicyError> {
    let config = &settings.config;
    let agent = config
        .agents
        .get(crate::auth::DEFAULT_AGENT)
        .map(|a| (crate::auth::DEFAULT_AGENT, &a.tools));
    ToolPolicy::layered(
        &config.tools,
        config.project_tools.as_ref(),
        agent,
        &model.provider,
        &model.id,
        &config.mcp.scopes(&config.project_mcp),
    )
}

/// A new loop history with the configured thresholds; one per session.
pub fn loop_detector(settings: &Settings) -> SharedLoops {
    Arc::new(parking_lot::Mutex::new(LoopDetector::new(
        settings.config.loop_detection.unwrap_or_default(),
    )))
}

/// A run's tool guard: the policy for `model`, the session's loop history
/// and the configured hooks.
/// The hooks run in `sandbox` (the session's).
pub fn tool_guard(
    settings: &Settings,
    model: &Model,
    loops: SharedLoops,
    session_id: &str,
    cwd: &Path,
    sandbox: Option<Arc<crate::tools::sandbox::Sandbox>>,
) -> Result<ToolGuard, PolicyError> {
    Ok(ToolGuard::new(
        tool_policy(settings, model)?,
        loops,
        Hooks::new(settings.config.hooks.clone()).with_sandbox(sandbox),
        session_id,
        cwd,
    ))
}

/// A session's permission state: answers remembered for this project in
/// the user's state, the user's sensitive paths, and the sandbox its
/// commands run in.
pub fn permissions(settings: &Settings, mode: Mode, roots: Vec<PathBuf>) -> Permissions {
    let config_dir = &settings.paths.config_dir;
    let file = state_file(config_dir, &settings.project.root);
    Permissions::new(mode, roots, Some(file))
        .with_sensitive(Sensitive::new(
            settings.env("HOME").map(PathBuf::from),
            Some(config_dir.clone()),
        ))
        .with_sandbox(Arc::new(sandbox(settings)))
}

/// The variable that chooses the sandbox mode of one pincer process.
pub const SANDBOX_VARIABLE: &str = "PINCER_SANDBOX";

/// The sandbox of a session: the user's `[sandbox]`, the `main` agent's
/// over it, the model's `[sandbox.by_provider]` tables once the session
/// says its model ([`crate::tools::sandbox::Sandbox::set_model`]),
/// `PINCER_SANDBOX`, and last the project's, which only narrows.
/// A session nobody watches is made so later
/// ([`crate::tools::sandbox::Sandbox::make_unattended`]).
pub fn sandbox(settings: &Settings) -> crate::tools::sandbox::Sandbox {
    use crate::tools::sandbox;
    let config = &settings.config;
    let home = settings.env("HOME").map(PathBuf::from);
    let mut merged = match config.agents.get(crate::auth::DEFAULT_AGENT) {
        Some(agent) => config.sandbox.overlay(&agent.sandbox),
        None => config.sandbox.clone(),
    };
    // `PINCER_SANDBOX` chooses the mode for this process (a script, CI),
    // over the model's tables too; a project still narrows it.
    let mut forced = None;
    if let Some(value) = settings.env(SANDBOX_VARIABLE) {
        match sandbox::SandboxMode::parse(value) {
            Some(mode) => {
                merged.mode = Some(mode);
                forced = Some(mode);
            }
            None => tracing::warn!(
                "{SANDBOX_VARIABLE}={value} is not a sandbox mode (workspace-write, read-only or off); it is ignored"
            ),
        }
    }
    let resolved = sandbox::Settings::from_config(&merged, home.as_deref());
    let mut pincer_dirs = vec![settings.paths.config_dir.clone()];
    if settings.paths.data_dir != settings.paths.config_dir {
        pincer_dirs.push(settings.paths.data_dir.clone());
    }
    sandbox::Sandbox::new(resolved, config.project_sandbox.clone(), home, pincer_dirs)
        .with_models(&merged)
        .with_forced_mode(forced)
}

/// The Claude Code settings a run of `model` needs, with the model and
/// credential pincer's own loop falls back to; `None` when `model`'s
/// provider does not run its turns there.
pub fn claude_code_runtime(settings: &Settings, model: &Model) -> Option<claude_code::Settings> {
    let target = settings.claude_code(model)?;
    let native = match settings.catalog.resolve(&target.native) {
        Ok(native) => native,
        Err(e) => {
            tracing::warn!(model = %target.native, error = %e, "no native model to fall back to from Claude Code");
            model.clone()
        }
    };
    let attempt = settings.credential_without_cli(&native);
    Some(claude_code::Settings {
        path: settings.resolve_program(&target.path),
        native_key: attempt.as_ref().and_then(|a| a.secret.clone()),
        native_profile: attempt.and_then(|a| a.id),
        native,
    })
}

/// Sets `config` up to run its turns through Claude Code when its model's
/// provider says so: the runtime, and credentials for pincer's own calls
/// (compaction, a failed-over turn) that never include the CLI's login.
pub fn use_claude_code(
    settings: &Settings,
    config: &mut AgentConfig,
    session: Arc<claude_code::Session>,
) {
    let Some(claude_code) = claude_code_runtime(settings, &config.model) else {
        return;
    };
    let attempt = settings.credential_without_cli(&config.model);
    config.key = attempt.as_ref().and_then(|a| a.secret.clone());
    config.auth_profile = attempt.and_then(|a| a.id);
    if let Some(inner) = config.credentials.take() {
        config.credentials = Some(Arc::new(crate::auth::Excluding {
            inner,
            ids: vec![crate::auth::external::CLAUDE_CODE_ID.to_string()],
        }));
    }
    config.runtime = Some(Arc::new(claude_code::ClaudeCode::new(claude_code, session)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env(home: &Path) -> std::collections::BTreeMap<String, String> {
        [("PINCER_HOME".to_string(), home.display().to_string())].into()
    }

    #[test]
    fn the_cache_ttl_is_configurable_and_five_minutes_by_default() {
        let home = tempfile::tempdir().unwrap();
        let s = Settings::load(home.path(), env(home.path())).unwrap();
        assert_eq!(prune(&s).ttl, std::time::Duration::from_secs(300));
        std::fs::write(home.path().join("config.toml"), "cache_ttl = \"1h\"\n").unwrap();
        let s = Settings::load(home.path(), env(home.path())).unwrap();
        assert_eq!(
            prune(&s),
            prune::Settings {
                ttl: std::time::Duration::from_secs(3_600),
                ..Default::default()
            }
        );
        std::fs::write(home.path().join("config.toml"), "cache_ttl = \"soon\"\n").unwrap();
        let err = Settings::load(home.path(), env(home.path())).unwrap_err();
        assert!(err.to_string().contains("cache_ttl `soon`"), "{err}");
    }
}
