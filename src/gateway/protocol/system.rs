//! The params of OpenClaw's system, channel and maintenance methods:
//! `channels.status`, `commands.list`, `sessions.cleanup` and `wake`
//! (their shapes are the `openclaw` package's `ChannelsStatusParamsSchema`,
//! `CommandsListParamsSchema`, `SessionsCleanupParamsSchema` and
//! `WakeParamsSchema`).

use std::collections::BTreeMap;

use serde::Deserialize;

/// `health`: `probe` is OpenClaw's "not from the cache"; pincer's answer
/// is never cached.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthParams {
    pub probe: Option<bool>,
}

/// `channels.status`: `probe` is answered from the channels' live state.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelsStatusParams {
    pub probe: Option<bool>,
    pub timeout_ms: Option<u64>,
    pub channel: Option<String>,
}

/// `commands.list`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandsListParams {
    pub session_key: Option<String>,
    pub agent_id: Option<String>,
    pub provider: Option<String>,
    pub scope: Option<CommandScope>,
    pub include_args: Option<bool>,
}

/// Where a command is typed: into a message (`text`), or a platform's
/// own menu (`native`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommandScope {
    Text,
    Native,
    Both,
}

/// `sessions.cleanup`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CleanupParams {
    pub agent: Option<String>,
    pub active_key: Option<String>,
    pub all_agents: Option<bool>,
    pub enforce: Option<bool>,
    pub fix_missing: Option<bool>,
    pub fix_dm_scope: Option<bool>,
}

/// `wake`: a system event's text, for now or the next heartbeat.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WakeParams {
    pub mode: WakeMode,
    pub text: String,
    pub session_key: Option<String>,
    pub agent_id: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeMode {
    Now,
    NextHeartbeat,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_params_take_openclaw_s_fields_and_refuse_others() {
        let wake: WakeParams = crate::gateway::protocol::params(
            "wake",
            json!({"mode": "next-heartbeat", "text": "x", "sessionKey": "k"}),
        )
        .unwrap();
        assert_eq!(wake.mode, WakeMode::NextHeartbeat);
        let error = crate::gateway::protocol::params::<WakeParams>(
            "wake",
            json!({"mode": "soon", "text": "x"}),
        )
        .unwrap_err();
        assert!(error.contains("unknown variant `soon`"), "{error}");
        let list: CommandsListParams = crate::gateway::protocol::params(
            "commands.list",
            json!({"scope": "both", "includeArgs": false}),
        )
        .unwrap();
        assert_eq!(list.scope, Some(CommandScope::Both));
        let error = crate::gateway::protocol::params::<CleanupParams>(
            "sessions.cleanup",
            json!({"dryRun": true}),
        )
        .unwrap_err();
        assert!(
            error.starts_with("sessions.cleanup: `dryRun` is not supported by pincer"),
            "{error}"
        );
        let error = crate::gateway::protocol::params::<ChannelsStatusParams>(
            "channels.status",
            json!({"timeoutMs": -1}),
        )
        .unwrap_err();
        assert_eq!(
            error,
            "channels.status: `timeoutMs` must be a non-negative integer, not integer `-1`"
        );
    }
}

/// The answer of a method that did what it was asked and has nothing
/// else to say (`chat.subscribe`, `exec.approval.resolve`, …).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Ack {
    pub ok: bool,
}

impl Ack {
    pub const OK: Self = Self { ok: true };
}

/// `health`'s answer: the gateway runs, and since when.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub ok: bool,
    pub uptime_ms: u64,
}

/// `status`'s answer: OpenClaw's status summary, as far as pincer has its
/// parts (it has no degraded plugins or secrets, and no session stores
/// apart from its one directory).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub pid: u32,
    pub uptime_ms: u64,
    pub degraded_secret_owners: Vec<String>,
    pub degraded_plugins: Vec<String>,
    pub sessions: StatusSessions,
}

/// `status`'s sessions: how many, what a new one gets, the most recent.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusSessions {
    pub paths: Vec<String>,
    pub count: usize,
    pub defaults: StatusDefaults,
    pub recent: Vec<super::sessions::Row>,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDefaults {
    pub model: Option<String>,
    pub context_tokens: Option<u64>,
}

/// One entry of `system-presence`: the gateway's own, or a connected
/// client's as its `connect` described it. What is not known is left out,
/// as OpenClaw leaves it out.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PresenceEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_family: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<&'static str>>,
    /// `self` for the gateway, `connect` for a client.
    pub reason: &'static str,
    pub text: String,
    pub ts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub online_since: Option<u64>,
}

/// `agents.list`'s answer: pincer's one agent, `main`.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Agents {
    pub default_id: &'static str,
    pub ownership: &'static str,
    pub selection_required: bool,
    pub main_key: &'static str,
    pub scope: &'static str,
    pub agents: Vec<Agent>,
}

/// An agent: its workspace, and what its new sessions start with.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub id: &'static str,
    pub name: &'static str,
    pub kind: &'static str,
    pub workspace: std::path::PathBuf,
    pub thinking_levels: Vec<super::sessions::ThinkingOption>,
    pub thinking_default: String,
    /// OpenClaw's name for the mode new sessions start in (none for
    /// ask-first: its "default").
    pub default_permission_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<AgentModel>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AgentModel {
    pub primary: String,
}

/// `hello-ok`'s `snapshot.sessionDefaults`: OpenClaw's three keys, and
/// what a new session here starts with, so that a client such as `pincer
/// acp --connect` can show a session's options before it has a
/// transcript.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionDefaults {
    pub default_agent_id: &'static str,
    pub main_key: &'static str,
    pub main_session_key: &'static str,
    pub cwd: std::path::PathBuf,
    pub model: Option<String>,
    pub thinking_level: String,
    pub thinking_levels: Vec<super::sessions::ThinkingOption>,
    pub permission_mode: &'static str,
    pub permission_modes: Vec<PermissionMode>,
    pub queue_mode: &'static str,
}

/// A permission mode a session can be in.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PermissionMode {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
}

/// `channels.status`'s answer: each configured chat channel as OpenClaw's
/// channel summary and its one account (`default`: a pincer channel is
/// one bot).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelsStatus {
    pub ts: u64,
    pub channel_order: Vec<&'static str>,
    pub channel_labels: BTreeMap<&'static str, &'static str>,
    pub channels: BTreeMap<&'static str, ChannelSummary>,
    pub channel_accounts: BTreeMap<&'static str, Vec<ChannelAccount>>,
    pub channel_default_account_id: BTreeMap<&'static str, &'static str>,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelSummary {
    pub configured: bool,
    pub running: bool,
    pub last_start_at: Option<u64>,
    pub last_stop_at: Option<u64>,
    pub last_error: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelAccount {
    #[serde(flatten)]
    pub summary: ChannelSummary,
    pub account_id: &'static str,
    pub enabled: bool,
    pub last_inbound_at: Option<u64>,
}

/// `sessions.cleanup`'s answer for one store (pincer's key map). pincer
/// prunes, caps and archives nothing, so those counts are 0.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cleanup {
    pub agent_id: &'static str,
    pub store_path: std::path::PathBuf,
    pub mode: &'static str,
    pub dry_run: bool,
    pub before_count: usize,
    pub after_count: usize,
    pub missing: usize,
    pub dm_scope_retired: usize,
    pub model_run_pruned: usize,
    pub archived: usize,
    pub cap_archived: usize,
    pub pruned: usize,
    pub capped: usize,
    pub unreferenced_artifacts: Artifacts,
    pub disk_budget: Option<u64>,
    pub would_mutate: bool,
    pub applied: bool,
    pub applied_count: usize,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifacts {
    pub scanned_files: u64,
    pub removed_files: u64,
    pub freed_bytes: u64,
    pub older_than_ms: u64,
}

/// `sessions.cleanup` with `allAgents`: every agent's store (pincer's one).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupAll {
    pub all_agents: bool,
    pub mode: &'static str,
    pub dry_run: bool,
    pub stores: Vec<Cleanup>,
}

/// `config.get`'s answer: OpenClaw's config snapshot, as far as pincer's
/// config.toml says what OpenClaw's config would.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSnapshot {
    pub path: std::path::PathBuf,
    pub included_paths: Vec<String>,
    pub exists: bool,
    pub valid: bool,
    /// `null`: pincer's file is not OpenClaw's config.
    pub raw: Option<String>,
    pub parsed: Option<ProjectedConfig>,
    pub source_config: Option<ProjectedConfig>,
    pub resolved: Option<ProjectedConfig>,
    pub runtime_config: Option<ProjectedConfig>,
    pub config: Option<ProjectedConfig>,
    pub hash: String,
    pub config_revision_hash: String,
    pub applied_config_hash: String,
    pub issues: Vec<ConfigIssue>,
    pub warnings: Vec<ConfigIssue>,
    pub legacy_issues: Vec<ConfigIssue>,
}

/// What of OpenClaw's config pincer's has: the gateway's bind, port and
/// auth mode, and the default model and workspace.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProjectedConfig {
    pub gateway: GatewayConfig,
    pub agents: AgentsConfig,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct GatewayConfig {
    pub mode: &'static str,
    pub bind: &'static str,
    pub port: Option<u16>,
    pub auth: AuthConfig,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AuthConfig {
    pub mode: &'static str,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AgentsConfig {
    pub defaults: AgentDefaults,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AgentDefaults {
    pub model: ModelChoice,
    pub workspace: std::path::PathBuf,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ModelChoice {
    pub primary: Option<String>,
}

/// A problem with the config file.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ConfigIssue {
    pub path: String,
    pub message: String,
}

/// `commands.list`'s answer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Commands {
    pub commands: Vec<Command>,
}

/// A command as OpenClaw's entry: skills are `skill`, the rest `native`,
/// all typed into a message (`text`).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    pub name: String,
    pub description: String,
    pub source: &'static str,
    pub scope: &'static str,
    pub accepts_args: bool,
    pub text_aliases: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<CommandArg>>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct CommandArg {
    pub name: &'static str,
    pub description: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
}
