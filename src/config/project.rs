//! A project's `.pincer/config.toml`: where pincer looks for it, and which
//! of its keys it honours before and after the user trusts the project.
//!
//! The file comes with a repository that someone else may have written.
//! Before the user trusts the project, only keys that narrow what pincer
//! does are honoured (a stricter mode, lower limits, tool denials,
//! compaction and display settings); everything that would start a
//! process, choose where a credential or the conversation goes, or loosen
//! a permission is ignored and reported. Some keys are never taken from a
//! project, trusted or not: OAuth endpoints, hooks, `bypass`, the shell's
//! environment, and any change to a provider or MCP server the user
//! configured (or a built-in provider).
//!
//! The file is looked for from the cwd up to the project root (the nearest
//! `.git`, never above the user's home), and a file in a directory other
//! users can write to is never read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::Config;
use super::Mode;
use crate::mcp::ServerConfig;

/// The `*.toml` files of `dir`, sorted.
pub fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
        .collect();
    files.sort();
    files
}

/// Where older versions kept remembered permission answers:
/// `<project>/.pincer/permissions.toml`. pincer no longer reads it (a
/// repository could commit one); [`super::ProjectState`] reports it.
pub fn permissions_file(project: &Path) -> PathBuf {
    project.join(".pincer").join("permissions.toml")
}

/// Why a project key was not honoured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// Honoured once the user trusts the project.
    NeedsTrust,
    /// Never taken from a project.
    Never,
}

/// A project key pincer did not honour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// The key as written in TOML (`providers.anthropic.base_url`).
    pub key: String,
    pub why: Why,
}

/// The project root for `cwd`: the nearest directory holding `.git`, not
/// above `home`; else `cwd` itself.
pub fn root(cwd: &Path, home: Option<&Path>) -> PathBuf {
    for dir in cwd.ancestors() {
        if dir.join(".git").exists() {
            return dir.to_path_buf();
        }
        if home == Some(dir) {
            break;
        }
    }
    cwd.to_path_buf()
}

/// The directories whose `.pincer/` belongs to the project, nearest first:
/// the cwd and its ancestors up to the project root.
pub fn dirs(cwd: &Path, root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for dir in cwd.ancestors() {
        dirs.push(dir.to_path_buf());
        if dir == root {
            return dirs;
        }
    }
    vec![cwd.to_path_buf()]
}

/// The nearest `.pincer/<name>` of the project, skipping (and describing)
/// any that other users could have written.
pub fn find(cwd: &Path, home: Option<&Path>, name: &str) -> (Option<PathBuf>, Vec<String>) {
    let root = root(cwd, home);
    let mut problems = Vec::new();
    for dir in dirs(cwd, &root) {
        let path = dir.join(".pincer").join(name);
        if !path.is_file() {
            continue;
        }
        match writable_by_others(&path) {
            None => return (Some(path), problems),
            Some(why) => problems.push(format!(
                "{} was not read: {why}, so another user could have written it",
                path.display()
            )),
        }
    }
    (None, problems)
}

/// `find` with the process's `HOME`.
pub fn find_here(cwd: &Path, name: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let (path, problems) = find(cwd, home.as_deref(), name);
    for problem in problems {
        tracing::warn!("{problem}");
    }
    path
}

/// Why `file` (in `<dir>/.pincer/`) could have been written by another
/// user: it, its `.pincer` directory or the directory holding that is
/// writable by everyone, or belongs to someone else.
fn writable_by_others(file: &Path) -> Option<String> {
    let pincer_dir = file.parent()?;
    let holder = pincer_dir.parent()?;
    foreign_writer(&[(holder, false), (pincer_dir, true), (file, true)])
}

/// Why any of `paths` could have been written by another user: it is
/// writable by everyone, or (where the flag says so) it belongs to a user
/// other than this one or root.
#[cfg(unix)]
pub fn foreign_writer(paths: &[(&Path, bool)]) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::getuid().as_raw();
    for (path, check_owner) in paths {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        if meta.mode() & 0o002 != 0 {
            return Some(format!("{} is writable by every user", path.display()));
        }
        if *check_owner && meta.uid() != me && meta.uid() != 0 {
            return Some(format!(
                "{} belongs to another user (uid {})",
                path.display(),
                meta.uid()
            ));
        }
    }
    None
}

#[cfg(not(unix))]
pub fn foreign_writer(_paths: &[(&Path, bool)]) -> Option<String> {
    None
}

/// The hash of the project files whose meaning depends on trust (the
/// config file and `SYSTEM.md`), which a remembered answer is tied to.
pub fn content_hash(files: &[(&str, &Path)]) -> String {
    let mut hasher = Sha256::new();
    for (label, path) in files {
        // Streamed: a repository's SYSTEM.md may be of any size.
        if let Ok(mut file) = std::fs::File::open(path) {
            hasher.update(label.as_bytes());
            hasher.update([0]);
            if let Ok(meta) = file.metadata() {
                hasher.update(meta.len().to_le_bytes());
            }
            let _ = std::io::copy(&mut file, &mut hasher);
        }
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How strict a mode is: lower asks more.
fn leniency(mode: Mode) -> u8 {
    match mode {
        Mode::Plan => 0,
        Mode::Default => 1,
        Mode::AcceptEdits => 2,
        Mode::Bypass => 3,
    }
}

/// The user's config with a project's layered over it.
#[derive(Debug)]
pub struct Layered {
    pub config: Config,
    pub ignored: Vec<Ignored>,
    /// What trusting the project would do, one line each (empty: nothing
    /// to ask about).
    pub grants: Vec<String>,
}

/// Layers `project` over `user`. `trusted` says whether the user trusts the
/// project; `builtin` whether a provider name is one of pincer's own.
pub fn layer(
    user: Config,
    project: Config,
    trusted: bool,
    builtin: &dyn Fn(&str) -> bool,
) -> Layered {
    let mut out = Layering {
        config: user,
        ignored: Vec::new(),
        grants: Vec::new(),
        trusted,
    };
    out.apply(project, builtin);
    Layered {
        config: out.config,
        ignored: out.ignored,
        grants: out.grants,
    }
}

struct Layering {
    config: Config,
    ignored: Vec<Ignored>,
    grants: Vec<String>,
    trusted: bool,
}

impl Layering {
    fn never(&mut self, key: impl Into<String>) {
        self.ignored.push(Ignored {
            key: shown(&key.into()),
            why: Why::Never,
        });
    }

    /// A key that needs trust: `true` when it may be applied. `grant` says
    /// what it would do, for the trust question.
    fn needs_trust(&mut self, key: impl Into<String>, grant: String) -> bool {
        self.grants.push(shown(&grant));
        if self.trusted {
            return true;
        }
        self.ignored.push(Ignored {
            key: shown(&key.into()),
            why: Why::NeedsTrust,
        });
        false
    }

    fn apply(&mut self, p: Config, builtin: &dyn Fn(&str) -> bool) {
        // Settings that only change how pincer shows or keeps things.
        let c = &mut self.config;
        c.stream_idle_timeout = p.stream_idle_timeout.or(c.stream_idle_timeout);
        c.retry_base_delay_ms = p.retry_base_delay_ms.or(c.retry_base_delay_ms);
        c.prune_tool_results = p.prune_tool_results.or(c.prune_tool_results);
        c.cache_ttl = p.cache_ttl.or(c.cache_ttl);
        c.queue_mode = p.queue_mode.or(c.queue_mode);
        c.compaction = super::CompactionConfig {
            enabled: p.compaction.enabled.or(c.compaction.enabled),
            reserve_tokens: p.compaction.reserve_tokens.or(c.compaction.reserve_tokens),
            keep_recent_tokens: p
                .compaction
                .keep_recent_tokens
                .or(c.compaction.keep_recent_tokens),
            memory_flush: p.compaction.memory_flush.or(c.compaction.memory_flush),
        };
        // The tool policy's project steps can only take tools away.
        if p.tools != crate::tools::rules::ToolsConfig::default() {
            c.project_tools = Some(p.tools);
        }

        // Helpers: a project may run fewer at once and nest them less deep,
        // never more.
        let current = self.config.subagents;
        if let Some(n) = p.subagents.max_parallel {
            if n as usize <= current.max_parallel() {
                self.config.subagents.max_parallel = Some(n);
            } else {
                self.never("subagents.max_parallel");
            }
        }
        if let Some(n) = p.subagents.max_depth {
            if n <= current.max_depth() {
                self.config.subagents.max_depth = Some(n);
            } else {
                self.never("subagents.max_depth");
            }
        }
        // Limits: lower is narrower; higher needs trust.
        if let Some(turns) = p.max_turns {
            let current = self.config.max_turns.unwrap_or(super::DEFAULT_MAX_TURNS);
            if turns <= current
                || self.needs_trust(
                    "max_turns",
                    format!("allow up to {turns} model calls per prompt"),
                )
            {
                self.config.max_turns = Some(turns);
            }
        }
        if let Some(retries) = p.max_retries {
            let current = self
                .config
                .max_retries
                .unwrap_or(super::DEFAULT_MAX_RETRIES);
            if retries <= current
                || self.needs_trust(
                    "max_retries",
                    format!("retry failed model calls up to {retries} times"),
                )
            {
                self.config.max_retries = Some(retries);
            }
        }

        // The mode: stricter is fine, looser needs trust, bypass never.
        if let Some(mode) = p.default_mode {
            let current = self.config.default_mode.unwrap_or_default();
            if mode == Mode::Bypass {
                self.never("default_mode = \"bypass\"");
            } else if leniency(mode) <= leniency(current)
                || self.needs_trust(
                    "default_mode",
                    format!("start sessions in `{}` mode", mode.id()),
                )
            {
                self.config.default_mode = Some(mode);
            }
        }

        // Which model hears the conversation, and how hard it thinks.
        if let Some(model) = p.model
            && self.needs_trust("model", format!("use the model `{model}`"))
        {
            self.config.model = Some(model);
        }
        if let Some(thinking) = p.thinking
            && self.needs_trust(
                "thinking",
                format!("set the thinking level to `{thinking:?}`").to_lowercase(),
            )
        {
            self.config.thinking = Some(thinking);
        }
        if let Some(model) = p.title_model
            && self.needs_trust(
                "title_model",
                format!("name sessions with the model `{model}`, which reads each first prompt and answer"),
            )
        {
            self.config.title_model = Some(model);
        }
        if let Some(models) = p.fallbacks
            && self.needs_trust(
                "fallbacks",
                format!(
                    "fall back to the models {} when the session's model fails",
                    quoted(&models)
                ),
            )
        {
            self.config.fallbacks = Some(models);
        }
        if let Some(settings) = p.loop_detection
            && self.needs_trust(
                "loop_detection",
                "change the loop detector's thresholds".to_string(),
            )
        {
            self.config.loop_detection = Some(settings);
        }

        // Never from a project.
        if !p.oauth.is_empty() {
            for name in p.oauth.keys() {
                self.never(format!("oauth.{name}"));
            }
        }
        if !p.hooks.is_empty() {
            self.never("hooks");
        }
        if !p.agents.is_empty() {
            for name in p.agents.keys() {
                self.never(format!("agents.{name}"));
            }
        }

        if p.shell != crate::tools::shell::ShellConfig::default() {
            self.never("shell");
        }
        // Where pincer listens and who may connect is the user's choice.
        if p.gateway.is_some() {
            self.never("gateway");
        }
        // Where sessions are stored and which servers the replicas share
        // (the store's URL may hold a password) are the user's.
        if p.cluster != super::cluster::ClusterConfig::default() {
            self.never("cluster");
        }
        // How long the process keeps sessions in memory is the user's.
        if p.acp != super::AcpConfig::default() {
            self.never("acp");
        }
        // The store is on the user's disk, and what undo can put back is
        // the user's safety net: a repository changes neither.
        if p.checkpoints != super::checkpoints::CheckpointsConfig::default() {
            self.never("checkpoints");
        }
        // The sandbox: a project may narrow it, never widen it, trusted or
        // not (it is how the user keeps a repository's commands in it).
        if p.sandbox != crate::tools::sandbox::SandboxConfig::default() {
            let user = &self.config.sandbox;
            let (narrowing, widening) = crate::tools::sandbox::narrowing(user, &p.sandbox);
            for key in widening {
                self.never(key);
            }
            self.config.project_sandbox = Some(narrowing);
        }
        // Where the agent answers, who may talk to it, and what it runs by
        // itself: the user's too.
        if !p.channels.is_empty() {
            self.never("channels");
        }
        if p.heartbeat.is_some() {
            self.never("heartbeat");
        }
        if !p.cron.is_empty() {
            self.never("cron");
        }

        self.providers(p.providers, builtin);
        self.mcp(p.mcp);
    }

    /// A project may add providers of its own (with trust); it never
    /// changes where a provider the user configured, or a built-in one,
    /// sends its requests and keys. New models for those need trust.
    fn providers(
        &mut self,
        providers: BTreeMap<String, crate::llm::catalog::ProviderConfig>,
        builtin: &dyn Fn(&str) -> bool,
    ) {
        for (name, mut provider) in providers {
            // Which program runs the turns is the user's choice alone: a
            // repository naming a `claude` to run would run a command of
            // its choosing, trusted or not.
            if provider.runtime.take().is_some() {
                self.never(format!("providers.{name}.runtime"));
            }
            if provider.claude_path.take().is_some() {
                self.never(format!("providers.{name}.claude_path"));
            }
            for model in &mut provider.models {
                if model.runtime.take().is_some() {
                    self.never(format!("providers.{name}.models.{}.runtime", model.id));
                }
            }
            let known = builtin(&name) || self.config.providers.contains_key(&name);
            if !known {
                let grant = describe_provider(&name, &provider);
                if self.needs_trust(format!("providers.{name}"), grant) {
                    self.config.providers.insert(name, provider);
                }
                continue;
            }
            let crate::llm::catalog::ProviderConfig {
                api,
                base_url,
                api_key_env,
                api_key,
                headers,
                models,
                runtime: _,
                claude_path: _,
            } = provider;
            for (set, field) in [
                (api.is_some(), "api"),
                (base_url.is_some(), "base_url"),
                (api_key_env.is_some(), "api_key_env"),
                (api_key.is_some(), "api_key"),
                (!headers.is_empty(), "headers"),
            ] {
                if set {
                    self.never(format!("providers.{name}.{field}"));
                }
            }
            if !models.is_empty() {
                let ids: Vec<String> = models.iter().map(|m| m.id.clone()).collect();
                if self.needs_trust(
                    format!("providers.{name}.models"),
                    format!("add the models {} to the provider `{name}`", quoted(&ids)),
                ) {
                    let entry = self.config.providers.entry(name).or_default();
                    for model in models {
                        entry.models.retain(|m| m.id != model.id);
                        entry.models.push(model);
                    }
                }
            }
        }
    }

    /// Project servers live apart from the user's: a project server never
    /// takes a user server's name (and with it the user's `env` or
    /// `headers`). For the user's and the editor's servers a project may
    /// only narrow: deny tools, or turn a server off.
    fn mcp(&mut self, mcp: crate::mcp::McpConfig) {
        let c = &mut self.config.mcp;
        c.startup_timeout = mcp.startup_timeout.or(c.startup_timeout);
        c.timeout = mcp.timeout.or(c.timeout);
        for (name, mut server) in mcp.servers {
            // How a server is confined is the user's to say: a project's
            // server runs in the session's sandbox.
            if server.sandbox.take().is_some() {
                self.never(format!("mcp.servers.{name}.sandbox"));
            }
            let starts = server.command.is_some() || server.url.is_some();
            let users = self
                .config
                .mcp
                .servers
                .get(&name)
                .is_some_and(|s| s.command.is_some() || s.url.is_some());
            if starts && !users {
                let grant = describe_server(&name, &server);
                if self.needs_trust(format!("mcp.servers.{name}"), grant) {
                    self.config.project_mcp.insert(name, server);
                }
                continue;
            }
            let ServerConfig {
                command,
                args,
                env,
                cwd,
                url,
                headers,
                timeout,
                allow,
                deny,
                enabled,
                sandbox: _,
            } = server;
            for (set, field) in [
                (command.is_some(), "command"),
                (!args.is_empty(), "args"),
                (!env.is_empty(), "env"),
                (cwd.is_some(), "cwd"),
                (url.is_some(), "url"),
                (!headers.is_empty(), "headers"),
                (!allow.is_empty(), "allow"),
            ] {
                if set {
                    self.never(format!("mcp.servers.{name}.{field}"));
                }
            }
            let entry = self.config.mcp.servers.entry(name).or_default();
            entry.deny.extend(deny);
            if enabled == Some(false) {
                entry.enabled = Some(false);
            }
            entry.timeout = timeout.or(entry.timeout);
        }
    }
}

/// `text` with control characters escaped: a name or URL from the project
/// must not be able to add lines of its own to the trust question.
fn shown(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{}`", shown(i)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_provider(name: &str, p: &crate::llm::catalog::ProviderConfig) -> String {
    let mut text = format!(
        "add the provider `{name}`, which sends the conversation to {}",
        p.base_url.as_deref().unwrap_or("(no base_url)")
    );
    if let Some(var) = &p.api_key_env {
        text.push_str(&format!(
            " with the value of your environment variable ${var}"
        ));
    } else if p.api_key.is_some() {
        text.push_str(" with a key written in the project's config");
    }
    if !p.headers.is_empty() {
        text.push_str(&format!(
            " and the headers {}",
            quoted(&p.headers.keys().cloned().collect::<Vec<_>>())
        ));
    }
    text
}

fn describe_server(name: &str, s: &ServerConfig) -> String {
    match (&s.command, &s.url) {
        (Some(command), _) => {
            let mut line = shell_words(
                std::iter::once(command.as_str()).chain(s.args.iter().map(String::as_str)),
            );
            if let Some(cwd) = &s.cwd {
                line.push_str(&format!(" (in {})", cwd.display()));
            }
            if !s.env.is_empty() {
                line.push_str(&format!(
                    " with the environment variables {}",
                    quoted(&s.env.keys().cloned().collect::<Vec<_>>())
                ));
            }
            format!("start the MCP server `{name}`: run {line}")
        }
        (None, Some(url)) => {
            let mut line = format!("connect to the MCP server `{name}` at {url}");
            if !s.headers.is_empty() {
                line.push_str(&format!(
                    " with the headers {}",
                    quoted(&s.headers.keys().cloned().collect::<Vec<_>>())
                ));
            }
            line
        }
        (None, None) => format!("configure the MCP server `{name}`"),
    }
}

/// A command line as a person would type it, quoting words with spaces or
/// shell characters.
fn shell_words<'a>(words: impl Iterator<Item = &'a str>) -> String {
    words
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
