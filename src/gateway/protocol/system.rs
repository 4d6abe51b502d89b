//! The params of OpenClaw's system, channel and maintenance methods:
//! `channels.status`, `commands.list`, `sessions.cleanup` and `wake`
//! (their shapes are the `openclaw` package's `ChannelsStatusParamsSchema`,
//! `CommandsListParamsSchema`, `SessionsCleanupParamsSchema` and
//! `WakeParamsSchema`).

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
