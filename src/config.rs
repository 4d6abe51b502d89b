//! Where pincer keeps its state, what the config files say, and which model
//! and credentials a session starts with.
//!
//! Everything lives under `$PINCER_HOME` when it is set; otherwise under the
//! platform's config and data directories. The user's `config.toml` is
//! trusted; a project's `.pincer/config.toml` is layered over it only as
//! far as the project is trusted (see [`project`] and [`trust`]).
//!
//! Config sits below the context, the agent and workflows and knows none
//! of them: the types here are what the files say (the config file's
//! schema, including the modes in [`modes`] and the hooks in [`hooks`]),
//! and each layer above builds its own objects from [`Settings`]
//! (`crate::agent::setup`, `crate::context::Sources::from_settings`,
//! `crate::workflow::discover`).

pub mod channels;
pub mod checkpoints;
pub mod cluster;
pub mod gateway;
pub mod hooks;
pub mod modes;
pub mod project;
pub mod trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::llm::catalog::{Catalog, CatalogError, ProviderConfig};
use crate::llm::{Model, Secret, ThinkingLevel};
pub use modes::{Mode, QueueMode};

/// The directories pincer reads and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub data_dir: PathBuf,
}

impl Paths {
    /// `$PINCER_HOME` for both, else the platform directories.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        if let Some(home) = env("PINCER_HOME") {
            let home = PathBuf::from(home);
            return Ok(Self {
                config_dir: home.clone(),
                data_dir: home,
            });
        }
        let dirs = directories::ProjectDirs::from("", "", "pincer").ok_or(ConfigError::NoHome)?;
        Ok(Self {
            config_dir: dirs.config_dir().to_path_buf(),
            data_dir: dirs.data_dir().to_path_buf(),
        })
    }

    pub fn user_config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    /// The agent's own workspace: identity and memory files (`SOUL.md`,
    /// `MEMORY.md`, `memory/`), shared by every project.
    pub fn workspace_dir(&self) -> PathBuf {
        self.config_dir
            .join("agents")
            .join("main")
            .join("workspace")
    }
}

/// The agent's own workspace under a config dir: identity and memory
/// files (`SOUL.md`, `MEMORY.md`, `memory/`), shared by every project.
pub fn workspace_dir(config_dir: &Path) -> PathBuf {
    config_dir.join("agents").join("main").join("workspace")
}

/// The contents of a `config.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Default model, `provider/model`.
    pub model: Option<String>,
    /// Default thinking level.
    pub thinking: Option<ThinkingLevel>,
    /// Model calls per prompt before the run stops with `max_turn_requests`.
    pub max_turns: Option<u32>,
    /// Seconds without progress from the provider (a real event, not a
    /// keep-alive) before a stream fails.
    pub stream_idle_timeout: Option<u64>,
    /// The mode new sessions start in: default, accept-edits, plan, bypass.
    pub default_mode: Option<Mode>,
    /// Retries of transient provider failures (rate limits, overload, 5xx).
    pub max_retries: Option<u32>,
    /// Base of the exponential retry backoff, in milliseconds.
    pub retry_base_delay_ms: Option<u64>,
    /// The model that names sessions after their first turn, as
    /// `provider/model`, or `none` to keep the first prompt as the title.
    /// Unset: the cheapest model of the session's provider.
    pub title_model: Option<String>,
    /// Models to try, in order, when the session's model cannot answer
    /// (its provider down, or none of its credentials working).
    pub fallbacks: Option<Vec<String>>,
    /// Trim old tool results in memory when an Anthropic prompt cache has
    /// expired (default true).
    pub prune_tool_results: Option<bool>,
    /// How long an idle prompt cache lives before old tool results are
    /// trimmed, as `"5m"`, `"1h"`, `"90s"` (default 5 minutes, Anthropic's
    /// standard cache; `"1h"` for its extended one).
    pub cache_ttl: Option<CacheTtl>,
    /// `[compaction]`: keeping long sessions inside the model's window.
    pub compaction: CompactionConfig,
    /// `[oauth.<provider>]`: OAuth endpoints, client id and scopes for
    /// `pincer login --oauth` (Anthropic's are built in).
    pub oauth: BTreeMap<String, crate::auth::oauth::OAuthConfig>,
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `[tools]`: which tools the model is offered (profile, allow, deny,
    /// per provider or model).
    pub tools: crate::tools::rules::ToolsConfig,
    /// `[agents.<id>]`: rules of one agent (pincer's is `main`).
    pub agents: BTreeMap<String, AgentConfigSection>,
    /// What a prompt sent while the agent is busy does: `steer` (default:
    /// it interrupts after the running tool) or `follow-up` (it waits for
    /// the run to end).
    pub queue_mode: Option<QueueMode>,
    /// `[loop_detection]`: thresholds of the loop detector.
    pub loop_detection: Option<LoopSettings>,
    /// `[[hooks]]`: the user's own commands at fixed points of a session.
    /// Only the user's config file may add hooks: a project's file comes
    /// with the repository, and a hook runs whatever it says.
    pub hooks: Vec<hooks::HookConfig>,
    /// `[mcp]`: MCP servers pincer starts for every session, and timeouts
    /// and allow / deny lists for the editor's servers.
    pub mcp: crate::mcp::McpConfig,
    /// `[shell]`: which environment variables commands inherit. Only the
    /// user's config file sets it (`overlay` leaves it out): a repository
    /// must not be able to pass keys through to commands.
    pub shell: crate::tools::shell::ShellConfig,
    /// `[gateway]`: the websocket listener (`pincer gateway`). Only the
    /// user's config file sets it: a repository never chooses where pincer
    /// listens or who may connect.
    pub gateway: Option<gateway::GatewayConfig>,
    /// `[acp]`: how `pincer acp` keeps its sessions (user's file only).
    pub acp: AcpConfig,
    /// `[subagents]`: how many helpers (the `task` tool) run at once and
    /// how deep they nest. A project's file may only lower them.
    pub subagents: SubagentsConfig,
    /// `[checkpoints]`: how much a project's checkpoint store may hold
    /// (user's file only).
    pub checkpoints: checkpoints::CheckpointsConfig,
    /// `[sandbox]`: what commands may read, write and reach. A project's
    /// file may only narrow it (kept apart in `project_sandbox`).
    pub sandbox: crate::tools::sandbox::SandboxConfig,
    /// `[channels.<name>]`: chat apps bridged to the agent by `pincer
    /// gateway`. Only the user's config file sets them: a repository never
    /// chooses where the agent answers or who may talk to it.
    pub channels: channels::ChannelsConfig,
    /// `[heartbeat]`: the gateway's periodic run (user's file only).
    pub heartbeat: Option<channels::HeartbeatConfig>,
    /// `[[cron]]`: scheduled runs of the gateway (user's file only: a job
    /// runs a prompt unasked).
    pub cron: Vec<channels::CronJob>,
    /// `[cluster]`: the database and bus a team's gateways share (user's
    /// file only: a repository never chooses where sessions are stored).
    pub cluster: cluster::ClusterConfig,
    /// The project's `[tools]`, which narrows the user's (kept apart so that
    /// a repository can take tools away but never add them).
    #[serde(skip)]
    pub project_tools: Option<crate::tools::rules::ToolsConfig>,
    /// A trusted project's own MCP servers, kept apart from the user's so
    /// that they can never take a user server's place (or its secrets).
    #[serde(skip)]
    pub project_mcp: BTreeMap<String, crate::mcp::ServerConfig>,
    /// The project's `[sandbox]`, which can only narrow the user's (kept
    /// apart so that it applies after every layer of the user's).
    #[serde(skip)]
    pub project_sandbox: Option<crate::tools::sandbox::SandboxConfig>,
}

impl Config {
    /// The environment rules for the commands of a session with this
    /// config: the user's `[shell]`, also removing the variables that hold
    /// the configured providers' keys.
    pub fn shell_env(&self) -> crate::tools::shell::ShellEnv {
        let key_variables = self
            .providers
            .values()
            .filter_map(|provider| provider.api_key_env.clone());
        crate::tools::shell::ShellEnv::new(&self.shell, key_variables)
    }
}

/// The `[subagents]` table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubagentsConfig {
    /// Helpers of one session running at the same time (default 4); more
    /// `task` calls wait for a free one.
    pub max_parallel: Option<u32>,
    /// How deep helpers may nest (default 2: a helper may start helpers
    /// of its own, theirs may not); 0 turns the `task` tool off.
    pub max_depth: Option<u32>,
}

impl SubagentsConfig {
    pub fn max_parallel(&self) -> usize {
        self.max_parallel.unwrap_or(4).clamp(1, 64) as usize
    }

    pub fn max_depth(&self) -> u32 {
        self.max_depth.unwrap_or(2).min(8)
    }
}

/// The `[acp]` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcpConfig {
    /// Seconds an editor's session may stay idle (no run, nothing queued,
    /// no question open) before its memory (history, MCP servers) is
    /// released; its next use loads it again from its transcript.
    pub session_idle_secs: Option<u64>,
}

impl AcpConfig {
    pub fn session_idle(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.session_idle_secs.unwrap_or(600).max(1))
    }
}

/// One `[agents.<id>]` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfigSection {
    /// The agent's own allow / deny lists, applied after the global ones.
    pub tools: crate::tools::rules::Rules,
    /// The agent's own `[sandbox]` keys, over the global ones.
    pub sandbox: crate::tools::sandbox::SandboxConfig,
}

/// A duration written the way people write it (`"5m"`, `"1h 30m"`,
/// `"90s"`), parsed by `humantime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheTtl(pub std::time::Duration);

impl Serialize for CacheTtl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

impl<'de> Deserialize<'de> for CacheTtl {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text).map(CacheTtl).map_err(|e| {
            serde::de::Error::custom(format!(
                "cache_ttl `{text}` is not a duration ({e}); write it like \"5m\" or \"1h\""
            ))
        })
    }
}

/// The `[compaction]` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionConfig {
    /// Compact automatically near the window (default true).
    pub enabled: Option<bool>,
    /// Tokens kept free below the window (default 16,384; at least 20,000
    /// for windows over 40,000).
    pub reserve_tokens: Option<u64>,
    /// Recent history kept unsummarised (default 20,000 tokens).
    pub keep_recent_tokens: Option<u64>,
    /// Write durable notes to the workspace before compacting (default true).
    pub memory_flush: Option<bool>,
}

/// `[loop_detection]` in `config.toml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoopSettings {
    pub enabled: bool,
    /// How many recent calls are remembered.
    pub history: usize,
    pub warning: usize,
    pub block: usize,
    pub breaker: usize,
}

impl Default for LoopSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            history: 30,
            warning: 10,
            block: 20,
            breaker: 30,
        }
    }
}

pub const DEFAULT_MAX_TURNS: u32 = 100;
pub const DEFAULT_MAX_RETRIES: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot find a home directory for pincer's state; set PINCER_HOME")]
    NoHome,
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error(transparent)]
    Model(#[from] CatalogError),
}

/// The largest config file pincer reads: a repository's file must not be
/// able to make pincer read gigabytes.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

fn read_config(path: &Path) -> Result<Option<Config>, ConfigError> {
    use std::io::Read;
    let text = match std::fs::File::open(path).and_then(|file| {
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text)?;
        Ok(text)
    }) {
        Ok(text) if text.len() as u64 > MAX_CONFIG_BYTES => {
            return Err(ConfigError::Parse {
                path: path.to_path_buf(),
                message: format!("it is larger than {MAX_CONFIG_BYTES} bytes"),
            });
        }
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let config: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    check_base_urls(&config).map_err(|message| ConfigError::Parse {
        path: path.to_path_buf(),
        message,
    })?;
    Ok(Some(config))
}

/// Every `[providers.<name>] base_url` must be an `http://` or `https://`
/// address with a host. Caught here, a typo is one clear message when the
/// file is read; caught by the HTTP client, it would be an error on every
/// prompt (`localhost:11434/v1` even parses as a URL of scheme
/// `localhost`).
fn check_base_urls(config: &Config) -> Result<(), String> {
    for (name, provider) in &config.providers {
        let Some(base_url) = provider.base_url.as_deref() else {
            continue;
        };
        let usable = url::Url::parse(base_url)
            .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
        if !usable {
            return Err(format!(
                "providers.{name}.base_url `{base_url}` is not an http:// or https:// address; \
                 write it with its scheme, e.g. `http://{}`",
                base_url
                    .split_once("://")
                    .map_or(base_url, |(_, rest)| rest)
                    .trim_start_matches('/')
            ));
        }
    }
    Ok(())
}

/// Whether the user trusts the project a session runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Trusted, remembered under `PINCER_HOME` for this content.
    Trusted,
    /// Trusted for this session or run only (`allow once`, `--trust`).
    TrustedOnce,
    /// Not trusted (yet): the user has not answered for this content.
    Untrusted,
    /// The user chose "always reject" for this content.
    Rejected,
}

impl Trust {
    pub fn trusted(self) -> bool {
        matches!(self, Trust::Trusted | Trust::TrustedOnce)
    }
}

/// What pincer found in the project and what it made of it.
#[derive(Clone, Debug)]
pub struct ProjectState {
    /// The project root (the nearest `.git`, else the cwd).
    pub root: PathBuf,
    /// The project's `.pincer/config.toml`, if one was read.
    pub config_file: Option<PathBuf>,
    /// The hash of the files whose meaning depends on trust.
    pub hash: String,
    pub trust: Trust,
    /// Project keys that were not honoured.
    pub ignored: Vec<project::Ignored>,
    /// What trusting the project would do; empty when there is nothing
    /// to ask about.
    pub grants: Vec<String>,
    /// Files that were not read, and why.
    pub problems: Vec<String>,
    /// A `.pincer/permissions.toml` in the working tree, which pincer no
    /// longer reads.
    pub stray_permissions: Option<PathBuf>,
}

impl ProjectState {
    /// Whether the user should be asked to trust the project.
    pub fn should_ask(&self) -> bool {
        self.trust == Trust::Untrusted && !self.grants.is_empty()
    }

    /// What to tell the user about the project's configuration: the keys
    /// that were ignored and how to change that, the files left unread.
    pub fn report(&self) -> Option<String> {
        let mut parts = Vec::new();
        let file = self.config_file.as_ref().map_or_else(
            || ".pincer/config.toml".to_string(),
            |p| p.display().to_string(),
        );
        let pending: Vec<&str> = self
            .ignored
            .iter()
            .filter(|i| i.why == project::Why::NeedsTrust)
            .map(|i| i.key.as_str())
            .collect();
        if !pending.is_empty() {
            parts.push(format!(
                "pincer ignored these keys of {file} because you have not trusted this project: {}. \
                 If you trust it, answer \"Always allow\" when pincer asks, or run `pincer trust {}`.",
                pending.join(", "),
                self.root.display()
            ));
        }
        let never: Vec<&str> = self
            .ignored
            .iter()
            .filter(|i| i.why == project::Why::Never)
            .map(|i| i.key.as_str())
            .collect();
        if !never.is_empty() {
            parts.push(format!(
                "pincer never takes these keys from a project's config, trusted or not, and ignored them in {file}: {}. \
                 Put them in your own config.toml if you want them.",
                never.join(", ")
            ));
        }
        if let Some(path) = &self.stray_permissions {
            parts.push(format!(
                "pincer ignored {}: remembered permission answers come only from your own answers, \
                 which pincer keeps in its state directory. Answer \"Always allow\" again for what you want remembered.",
                path.display()
            ));
        }
        parts.extend(self.problems.iter().cloned());
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

/// Who reads a credential hint: the way out differs between a command line
/// (`--model`, a restart) and an editor (the session's Model option).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frontend {
    Cli,
    Editor,
}

/// Everything resolved at start-up: paths, merged config, model catalog, and
/// the process environment the providers' variables come from.
#[derive(Clone)]
pub struct Settings {
    pub paths: Paths,
    pub config: Config,
    pub catalog: Catalog,
    pub project: ProjectState,
    env: BTreeMap<String, String>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The environment holds API keys; never print it.
        f.debug_struct("Settings")
            .field("paths", &self.paths)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Loads the user config and, as far as the project is trusted, the
    /// project config for `cwd`.
    pub fn load(cwd: &Path, env: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        Self::load_with(cwd, env, false)
    }

    /// As [`Self::load`]; `trust_once` trusts the project for this load
    /// only (an "allow once" answer, `pincer run --trust`).
    pub fn load_with(
        cwd: &Path,
        env: BTreeMap<String, String>,
        trust_once: bool,
    ) -> Result<Self, ConfigError> {
        let lookup = |k: &str| env.get(k).filter(|v| !v.is_empty()).cloned();
        let paths = Paths::from_env(&lookup)?;
        let user = read_config(&paths.user_config_file())?.unwrap_or_default();
        let home = lookup("HOME").map(PathBuf::from);
        let root = project::root(cwd, home.as_deref());
        let (config_file, mut problems) = project::find(cwd, home.as_deref(), "config.toml");
        let (system_file, system_problems) = project::find(cwd, home.as_deref(), "SYSTEM.md");
        problems.extend(system_problems);
        // A project's workflows run tools and models: they need trust, and
        // changing one asks again.
        let workflow_files = project::toml_files(&root.join(".pincer").join("workflows"));
        let workflow_labels: Vec<String> = workflow_files
            .iter()
            .map(|p| {
                format!(
                    "workflows/{}",
                    p.file_name().unwrap_or_default().to_string_lossy()
                )
            })
            .collect();
        let hashed: Vec<(&str, &Path)> = config_file
            .iter()
            .map(|p| ("config.toml", p.as_path()))
            .chain(system_file.iter().map(|p| ("SYSTEM.md", p.as_path())))
            .chain(
                workflow_labels
                    .iter()
                    .zip(&workflow_files)
                    .map(|(label, p)| (label.as_str(), p.as_path())),
            )
            .collect();
        let hash = project::content_hash(&hashed);
        let stored = trust::TrustStore::new(&paths.config_dir)
            .get(&root)
            .unwrap_or_else(|e| {
                // An unreadable store trusts nothing.
                problems.push(e.to_string());
                None
            })
            .filter(|entry| entry.hash == hash);
        let trust = match (trust_once, stored.map(|e| e.decision)) {
            (_, Some(trust::Decision::Trusted)) => Trust::Trusted,
            (true, _) => Trust::TrustedOnce,
            (false, Some(trust::Decision::Rejected)) => Trust::Rejected,
            (false, None) => Trust::Untrusted,
        };
        let (config, ignored, grants) = match &config_file {
            Some(path) => match read_config(path)? {
                Some(project) => {
                    let layered = project::layer(user, project, trust.trusted(), &|name| {
                        Catalog::is_builtin(name)
                    });
                    (layered.config, layered.ignored, layered.grants)
                }
                None => (user, Vec::new(), Vec::new()),
            },
            None => (user, Vec::new(), Vec::new()),
        };
        let mut grants = grants;
        if !workflow_files.is_empty() {
            grants.push(format!(
                "run the project's workflows ({}), whose steps call tools and models",
                workflow_labels.join(", ")
            ));
        }
        let stray = project::permissions_file(&root);
        let project = ProjectState {
            root,
            config_file,
            hash,
            trust,
            ignored,
            grants,
            problems,
            stray_permissions: stray.is_file().then_some(stray),
        };
        let catalog = Catalog::new(&config.providers, &lookup);
        Ok(Self {
            paths,
            config,
            catalog,
            project,
            env,
        })
    }

    /// Loads with the process environment.
    pub fn load_from_process(cwd: &Path) -> Result<Self, ConfigError> {
        Self::load(cwd, std::env::vars().collect())
    }

    /// Loads with the process environment, trusting the project for this
    /// load only when `trust_once`.
    pub fn load_from_process_with(cwd: &Path, trust_once: bool) -> Result<Self, ConfigError> {
        Self::load_with(cwd, std::env::vars().collect(), trust_once)
    }

    pub fn env(&self, key: &str) -> Option<&str> {
        self.env
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The credentials of one session (or one `pincer run`): auth
    /// profiles, then environment variables, with failover state.
    pub fn credentials(&self) -> crate::auth::SessionCredentials {
        let store = crate::auth::Store::new(crate::auth::profiles_path(
            &self.paths.config_dir,
            crate::auth::DEFAULT_AGENT,
        ));
        let resolver = crate::auth::Resolver::new(
            store,
            self.env.clone(),
            std::sync::Arc::new(crate::auth::SystemClock),
        );
        let providers = self
            .catalog
            .provider_names()
            .filter_map(|name| {
                let p = self.catalog.provider(name)?;
                Some((
                    name.to_string(),
                    crate::auth::ProviderKeys {
                        env_var: p.api_key_env.clone(),
                        config_key: p.api_key.clone(),
                        key_optional: p.key_optional,
                    },
                ))
            })
            .collect();
        let oauth = self
            .catalog
            .provider_names()
            .filter_map(|name| Some((name.to_string(), self.oauth(name)?)))
            .collect();
        crate::auth::SessionCredentials::new(resolver, providers, oauth)
    }

    /// The OAuth settings of `provider`: configured, else built in.
    pub fn oauth(&self, provider: &str) -> Option<crate::auth::oauth::OAuthConfig> {
        self.config
            .oauth
            .get(provider)
            .cloned()
            .or_else(|| crate::auth::oauth::builtin(provider))
    }

    /// The first credential to use for `model`: its id and secret.
    fn first_credential(&self, model: &Model) -> Option<crate::auth::Attempt> {
        use crate::auth::CredentialSource;
        self.credentials().attempts(model).into_iter().next()
    }

    /// The key for a model's provider, if there is one: the best auth
    /// profile, else the provider's environment variable.
    pub fn api_key(&self, model: &Model) -> Option<Secret> {
        self.first_credential(model)?.secret
    }

    /// Which credential calls to `model` use, for the record.
    pub fn credential_source(&self, model: &Model) -> Option<String> {
        self.first_credential(model)?.id
    }

    /// Whether a model can be called: it has a credential or needs none.
    pub fn has_credentials(&self, model: &Model) -> bool {
        // Claude Code brings its own login; pincer never sees it.
        self.catalog.claude_code(model).is_some() || self.first_credential(model).is_some()
    }

    /// How `model`'s turns reach the Claude Code CLI, when its provider
    /// runs them there (`runtime = "claude-code"`, or a subscription
    /// provider).
    pub fn claude_code(&self, model: &Model) -> Option<crate::llm::catalog::ClaudeCodeTarget> {
        self.catalog.claude_code(model)
    }

    /// The best credential for `model` that is not Claude Code's own login.
    pub fn credential_without_cli(&self, model: &Model) -> Option<crate::auth::Attempt> {
        use crate::auth::CredentialSource;
        self.credentials()
            .attempts(model)
            .into_iter()
            .find(|a| a.id.as_deref() != Some(crate::auth::external::CLAUDE_CODE_ID))
    }

    /// The key for pincer's own calls on behalf of a session of `model`
    /// (titles): never Claude Code's login when the model runs there.
    pub fn own_call_key(&self, model: &Model, session_model: &Model) -> Option<Secret> {
        if self.claude_code(session_model).is_some() {
            self.credential_without_cli(model)?.secret
        } else {
            self.api_key(model)
        }
    }

    /// A program name as the user would run it: a bare name is looked up
    /// on this process's `PATH`; a path is taken as it is (after `~/`).
    pub fn resolve_program(&self, program: &str) -> PathBuf {
        let path = PathBuf::from(program);
        if let Some(rest) = program.strip_prefix("~/")
            && let Some(home) = self.env("HOME")
        {
            return PathBuf::from(home).join(rest);
        }
        if path.components().count() > 1 {
            return path;
        }
        self.env("PATH")
            .into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
            .unwrap_or(path)
    }

    /// Whether a model may be offered for choosing in a session: its
    /// credentials can be found without a network call. Bedrock needs no
    /// key up front (the AWS chain is asked at call time), so it is offered
    /// only when the AWS chain is configured in the environment or the
    /// shared files ([`crate::llm::bedrock::credentials::configured`]); the
    /// instance metadata service alone does not count. A model chosen
    /// explicitly (`--model`, the config) is still tried with whatever the
    /// chain finds.
    pub fn can_offer(&self, model: &Model) -> bool {
        // A Claude Code model is there to choose when its CLI is.
        if let Some(target) = self.catalog.claude_code(model) {
            if self.resolve_program(&target.path).is_file() {
                return true;
            }
            if crate::llm::catalog::SUBSCRIPTION_PROVIDERS.contains(&model.provider.as_str()) {
                return false;
            }
        }
        match self.first_credential(model) {
            None => false,
            Some(attempt) if attempt.id.is_none() && self.uses_aws_chain(model) => {
                let home = self.env("HOME").map(PathBuf::from);
                crate::llm::bedrock::credentials::configured(
                    &|name| self.env(name).map(str::to_string),
                    home.as_deref(),
                )
            }
            Some(_) => true,
        }
    }

    fn uses_aws_chain(&self, model: &Model) -> bool {
        model.api == crate::llm::Api::BedrockConverseStream
    }

    /// What a person must do to give pincer credentials for this model:
    /// when pincer has one, which it is and how to replace it (it was
    /// rejected); else where to put one. Never the credential itself.
    /// Worded for the command line: another model is chosen with `--model`.
    pub fn credential_hint(&self, model: &Model) -> String {
        self.hint(model, Frontend::Cli)
    }

    /// [`Settings::credential_hint`] inside an editor, where the way out is
    /// the session's Model option rather than a flag and a restart.
    pub fn credential_hint_in_editor(&self, model: &Model) -> String {
        self.hint(model, Frontend::Editor)
    }

    fn hint(&self, model: &Model, frontend: Frontend) -> String {
        let provider = &model.provider;
        let editor = frontend == Frontend::Editor;
        const ELSEWHERE: &str = "choose another model in this session's Model option";
        if let Some(id) = self.credential_source(model) {
            let (what, fix) = match id.strip_prefix("env:") {
                Some(var) => (
                    format!("the key in the {var} environment variable (credential {id})"),
                    if editor {
                        format!(
                            "put a valid key in {var} where the editor starts pincer (for Zed, \
                             under \"env\" in the agent_servers entry)"
                        )
                    } else {
                        "set a valid key there (for Zed, under \"env\" in the agent_servers \
                         entry) and restart pincer"
                            .to_string()
                    },
                ),
                None if id == "config" => (
                    format!(
                        "the api_key under [providers.{provider}] in pincer's config.toml \
                         (credential config)"
                    ),
                    "put a valid key there".to_string(),
                ),
                None if id.contains(':') && !id.starts_with("openclaw:") => (
                    format!("the auth profile {id}"),
                    format!(
                        "replace it with `pincer login --provider {provider} --profile {id}` or \
                         remove it with `pincer logout {id}`"
                    ),
                ),
                // Another tool's login that pincer borrowed (Claude Code,
                // Codex, OpenClaw).
                None => (
                    format!("the credential {id} that pincer borrowed from another tool's login"),
                    "log in there again".to_string(),
                ),
            };
            return if editor {
                format!("{provider} rejected {what}. To go on, {ELSEWHERE}; or {fix}.")
            } else {
                format!(
                    "{provider} rejected {what}; {fix}, or choose another model with --model or \
                     PINCER_MODEL."
                )
            };
        }
        if self.uses_aws_chain(model) && self.can_offer(model) {
            let what = "the AWS credentials found in the environment or ~/.aws (the AWS CLI's \
                        `aws sts get-caller-identity` shows whose they are)";
            return if editor {
                format!("{provider} rejected {what}. To go on, {ELSEWHERE}; or fix them.")
            } else {
                format!(
                    "{provider} rejected {what}; fix them, or choose another model with --model \
                     or PINCER_MODEL."
                )
            };
        }
        if self.uses_aws_chain(model) {
            let sources = "AWS_BEARER_TOKEN_BEDROCK, AWS_ACCESS_KEY_ID and \
                           AWS_SECRET_ACCESS_KEY, or AWS_PROFILE naming a profile in \
                           ~/.aws/config with keys, SSO or credential_process";
            return if editor {
                format!(
                    "No AWS credentials for {provider} were found. To go on, {ELSEWHERE}; or \
                     give pincer AWS credentials where the editor starts it: {sources}."
                )
            } else {
                format!("No AWS credentials for {provider} were found: set {sources}.")
            };
        }
        match self
            .catalog
            .provider(provider)
            .and_then(|p| p.api_key_env.clone())
        {
            Some(var) if editor => format!(
                "No API key for {provider}. To go on, {ELSEWHERE}; or set the {var} environment \
                 variable where the editor starts pincer (for Zed, under \"env\" in the \
                 agent_servers entry)."
            ),
            Some(var) => format!(
                "No API key for {provider}: set the {var} environment variable (for Zed, under \"env\" in the agent_servers entry) and restart pincer, or choose another model with --model or PINCER_MODEL."
            ),
            None if editor => {
                format!("No credentials for provider {provider}. To go on, {ELSEWHERE}.")
            }
            None => format!("No credentials for provider {provider}."),
        }
    }

    /// The model to start with: an explicit choice (`--model`), then
    /// `PINCER_MODEL`, then the config's `model`, then a default of the
    /// first provider that has a key.
    pub fn default_model(&self, explicit: Option<&str>) -> Result<Model, ConfigError> {
        let chosen = explicit
            .map(str::to_string)
            .or_else(|| self.env("PINCER_MODEL").map(str::to_string))
            .or_else(|| self.config.model.clone());
        if let Some(id) = chosen {
            return Ok(self.catalog.resolve(&id)?);
        }
        let fallback = [
            ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-4-5"),
            ("OPENAI_API_KEY", "openai/gpt-5"),
            (
                "OPENROUTER_API_KEY",
                "openrouter/anthropic/claude-sonnet-4.5",
            ),
        ]
        .into_iter()
        .find(|(var, _)| self.env(var).is_some())
        .map_or("anthropic/claude-sonnet-4-5", |(_, id)| id);
        Ok(self.catalog.resolve(fallback)?)
    }

    /// The configured fallback models that resolve.
    pub fn fallback_models(&self) -> Vec<Model> {
        self.config
            .fallbacks
            .iter()
            .flatten()
            .filter_map(|id| match self.catalog.resolve(id) {
                Ok(model) => Some(model),
                Err(e) => {
                    tracing::warn!(model = %id, error = %e, "ignoring a fallback model");
                    None
                }
            })
            .collect()
    }

    /// The MCP servers to start in `cwd` beside the editor's (`editor`
    /// names them): the user's, unless an editor server has the same name
    /// (the editor's replaces it), and a trusted project's own, which never
    /// take the name of a user's or an editor's server.
    pub fn mcp_specs(&self, cwd: &Path, editor: &[String]) -> Vec<crate::mcp::ServerSpec> {
        let mcp = &self.config.mcp;
        let user: Vec<crate::mcp::ServerSpec> = mcp
            .specs(cwd)
            .into_iter()
            .filter(|s| !editor.contains(&s.name))
            .collect();
        let taken = |name: &str| {
            editor.iter().any(|e| e == name)
                || mcp
                    .servers
                    .get(name)
                    .is_some_and(|s| s.command.is_some() || s.url.is_some())
        };
        let project = mcp
            .project_specs(&self.config.project_mcp, cwd)
            .into_iter()
            .filter(|s| {
                let free = !taken(&s.name);
                if !free {
                    tracing::warn!(server = %s.name, "the project's MCP server has the name of one of yours or the editor's; it is not started");
                }
                free
            });
        user.into_iter().chain(project).collect()
    }

    pub fn default_mode(&self) -> Mode {
        self.config.default_mode.unwrap_or_default()
    }

    pub fn thinking(&self) -> ThinkingLevel {
        self.config.thinking.unwrap_or_default()
    }

    pub fn max_turns(&self) -> u32 {
        self.config.max_turns.unwrap_or(DEFAULT_MAX_TURNS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env_with(home: &Path, pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.insert("PINCER_HOME".into(), home.display().to_string());
        env
    }

    #[test]
    fn bedrock_is_offered_only_with_aws_credentials_at_hand() {
        let home = tempfile::tempdir().unwrap();
        let home_var = ("HOME", home.path().to_str().unwrap());
        let offers = |pairs: &[(&str, &str)]| {
            let s = Settings::load(home.path(), env_with(home.path(), pairs)).unwrap();
            let bedrock = s
                .catalog
                .resolve("amazon-bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0")
                .unwrap();
            // It can always be tried (the chain may find an instance role).
            assert!(s.has_credentials(&bedrock));
            s.can_offer(&bedrock)
        };
        assert!(!offers(&[home_var, ("ANTHROPIC_API_KEY", "k")]));
        assert!(offers(&[
            home_var,
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "s")
        ]));
        std::fs::create_dir_all(home.path().join(".aws")).unwrap();
        std::fs::write(
            home.path().join(".aws/credentials"),
            "[default]\naws_access_key_id = AKID\naws_secret_access_key = s\n",
        )
        .unwrap();
        assert!(offers(&[home_var]));
        assert!(!offers(&[home_var, ("AWS_PROFILE", "other")]));
    }

    #[test]
    fn credential_hints_in_an_editor_name_the_model_option() {
        let home = tempfile::tempdir().unwrap();
        let s = Settings::load(
            home.path(),
            env_with(home.path(), &[("ANTHROPIC_API_KEY", "k")]),
        )
        .unwrap();
        let model = s.catalog.resolve("openai/gpt-5").unwrap();
        assert_eq!(
            s.credential_hint_in_editor(&model),
            "No API key for openai. To go on, choose another model in this session's Model \
             option; or set the OPENAI_API_KEY environment variable where the editor starts \
             pincer (for Zed, under \"env\" in the agent_servers entry)."
        );
        assert!(
            s.credential_hint(&model)
                .contains("--model or PINCER_MODEL")
        );
    }

    #[test]
    fn pincer_home_holds_everything() {
        let home = tempfile::tempdir().unwrap();
        let s = Settings::load(home.path(), env_with(home.path(), &[])).unwrap();
        assert_eq!(s.paths.config_dir, home.path());
        assert_eq!(s.paths.data_dir, home.path());
    }

    #[test]
    fn default_model_follows_the_available_key() {
        let home = tempfile::tempdir().unwrap();
        let s = Settings::load(
            home.path(),
            env_with(home.path(), &[("OPENAI_API_KEY", "k")]),
        )
        .unwrap();
        assert_eq!(s.default_model(None).unwrap().full_id(), "openai/gpt-5");
        let s = Settings::load(
            home.path(),
            env_with(
                home.path(),
                &[("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")],
            ),
        )
        .unwrap();
        assert_eq!(
            s.default_model(None).unwrap().full_id(),
            "anthropic/claude-sonnet-4-5"
        );
        let s = Settings::load(
            home.path(),
            env_with(
                home.path(),
                &[("OPENAI_API_KEY", "k"), ("PINCER_MODEL", "ollama/qwen3")],
            ),
        )
        .unwrap();
        assert_eq!(s.default_model(None).unwrap().full_id(), "ollama/qwen3");
        assert_eq!(
            s.default_model(Some("anthropic/claude-haiku-4-5"))
                .unwrap()
                .full_id(),
            "anthropic/claude-haiku-4-5"
        );
    }

    #[test]
    fn a_project_config_applies_as_far_as_the_project_is_trusted() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "model = \"openai/gpt-5\"\nmax_turns = 7\n[providers.lab]\nbase_url = \"http://lab:1/v1\"\napi_key_env = \"LAB_KEY\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(project.path().join(".pincer")).unwrap();
        std::fs::create_dir_all(project.path().join(".git")).unwrap();
        std::fs::write(
            project.path().join(".pincer/config.toml"),
            "model = \"lab/coder\"\nmax_turns = 5\n[providers.lab]\nbase_url = \"http://lab:2/v1\"\n",
        )
        .unwrap();
        let sub = project.path().join("src");
        std::fs::create_dir_all(&sub).unwrap();
        let env = env_with(home.path(), &[("LAB_KEY", "secret")]);
        let s = Settings::load(&sub, env.clone()).unwrap();
        assert_eq!(s.project.trust, Trust::Untrusted);
        assert_eq!(s.project.root, project.path());
        assert!(s.project.should_ask());
        assert_eq!(s.max_turns(), 5);
        assert_eq!(s.default_model(None).unwrap().full_id(), "openai/gpt-5");
        let report = s.project.report().unwrap();
        assert!(report.contains(": model."), "{report}");
        assert!(report.contains("providers.lab.base_url"), "{report}");
        // Trusted: the model applies, the user's provider does not move.
        trust::TrustStore::new(home.path())
            .set(project.path(), &s.project.hash, trust::Decision::Trusted)
            .unwrap();
        let s = Settings::load(&sub, env.clone()).unwrap();
        assert_eq!(s.project.trust, Trust::Trusted);
        let model = s.default_model(None).unwrap();
        assert_eq!(model.full_id(), "lab/coder");
        assert_eq!(model.base_url, "http://lab:1/v1");
        assert_eq!(s.api_key(&model), Some(Secret::new("secret")));
        // A changed file is untrusted again.
        std::fs::write(
            project.path().join(".pincer/config.toml"),
            "model = \"lab/other\"\n",
        )
        .unwrap();
        let s = Settings::load(&sub, env).unwrap();
        assert_eq!(s.project.trust, Trust::Untrusted);
        assert_eq!(s.default_model(None).unwrap().full_id(), "openai/gpt-5");
    }

    #[test]
    fn a_huge_config_file_is_refused_without_reading_it_all() {
        let home = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(home.path().join("config.toml")).unwrap();
        file.set_len(4 * 1024 * 1024 * 1024).unwrap();
        let err = Settings::load(home.path(), env_with(home.path(), &[])).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }

    #[test]
    fn broken_config_names_the_file() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), "model = [").unwrap();
        let err = Settings::load(home.path(), env_with(home.path(), &[])).unwrap_err();
        assert!(
            matches!(err, ConfigError::Parse { ref path, .. } if path.ends_with("config.toml"))
        );
    }

    #[test]
    fn a_base_url_without_a_scheme_is_refused_naming_the_provider_and_the_fix() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config.toml");
        for (base_url, fix) in [
            ("localhost:11434/v1", "http://localhost:11434/v1"),
            ("127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("ftp://lab/v1", "http://lab/v1"),
        ] {
            std::fs::write(
                &path,
                format!("[providers.lab]\nbase_url = \"{base_url}\"\n"),
            )
            .unwrap();
            let err = Settings::load(home.path(), env_with(home.path(), &[])).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "{} is not valid: providers.lab.base_url `{base_url}` is not an http:// or \
                     https:// address; write it with its scheme, e.g. `{fix}`",
                    path.display()
                )
            );
        }
        std::fs::write(&path, "[providers.lab]\nbase_url = \"http://lab:1/v1\"\n").unwrap();
        Settings::load(home.path(), env_with(home.path(), &[])).unwrap();
    }

    #[test]
    fn missing_key_hint_names_the_variable() {
        let home = tempfile::tempdir().unwrap();
        let s = Settings::load(home.path(), env_with(home.path(), &[])).unwrap();
        let model = s.default_model(None).unwrap();
        assert!(!s.has_credentials(&model));
        assert!(s.credential_hint(&model).contains("ANTHROPIC_API_KEY"));
        let local = s.catalog.resolve("ollama/qwen3").unwrap();
        assert!(s.has_credentials(&local));
    }
}
