//! OpenClaw's system, channel and maintenance methods: `channels.status`,
//! `sessions.cleanup`, `wake` and `config.get` (their params are
//! [`protocol::system`](crate::gateway::protocol::system)).

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, TextContent};
use serde_json::Value;

use super::{Reply, only_main, typed};
use crate::config::QueueMode;
use crate::gateway::conn::Conn;
use crate::gateway::frames::{ErrorShape, answer, now_ms};
use crate::gateway::hub::{self, Hub, MAIN_KEY};
use crate::gateway::protocol::system;

/// `channels.status`: each configured chat channel as OpenClaw's channel
/// summary and its one account (`default`: a pincer channel is one bot).
/// `probe` is taken, and answered with the channels' live state: pincer
/// does not call the platforms' APIs to answer it.
pub fn channels_status(hub: &Hub, params: Value) -> Reply {
    let query: system::ChannelsStatusParams = typed("channels.status", params)?;
    const LABELS: [(&str, &str); 4] = [
        ("telegram", "Telegram"),
        ("slack", "Slack"),
        ("discord", "Discord"),
        ("whatsapp", "WhatsApp"),
    ];
    let only = query.channel.as_deref();
    if let Some(channel) = only
        && !LABELS.iter().any(|(id, _)| *id == channel)
    {
        return Err(ErrorShape::invalid(format!("unknown channel: {channel}")));
    }
    let states = hub
        .channels
        .get()
        .map(|channels| channels.status())
        .unwrap_or_default();
    let mut status = system::ChannelsStatus {
        ts: now_ms(),
        channel_order: Vec::new(),
        channel_labels: Default::default(),
        channels: Default::default(),
        channel_accounts: Default::default(),
        channel_default_account_id: Default::default(),
    };
    for state in states.iter().filter(|s| only.is_none_or(|c| c == s.name)) {
        let label = LABELS
            .iter()
            .find(|(id, _)| *id == state.name)
            .map_or(state.name, |(_, label)| label);
        let summary = system::ChannelSummary {
            configured: true,
            running: state.running,
            last_start_at: state.last_start_ms,
            last_stop_at: state.last_stop_ms,
            last_error: state.last_error.clone(),
        };
        let account = system::ChannelAccount {
            summary: summary.clone(),
            account_id: "default",
            enabled: true,
            last_inbound_at: state.last_inbound_ms,
        };
        status.channel_order.push(state.name);
        status.channel_labels.insert(state.name, label);
        status.channels.insert(state.name, summary);
        status.channel_accounts.insert(state.name, vec![account]);
        status
            .channel_default_account_id
            .insert(state.name, "default");
    }
    answer(&status)
}

/// `sessions.cleanup` (`openclaw sessions cleanup`): OpenClaw's store
/// maintenance, as far as pincer has a store to keep: its session keys
/// (`keys.json`). A key whose session's transcript is gone is `missing`,
/// forgotten with `fixMissing`. pincer keeps no caps, ages or disk budget
/// on sessions (a transcript is the user's until they delete it), so
/// nothing is pruned, capped or archived, with or without `enforce`.
pub fn sessions_cleanup(hub: &Hub, params: Value) -> Reply {
    let query: system::CleanupParams = typed("sessions.cleanup", params)?;
    let all_agents = query.all_agents == Some(true);
    let enforce = query.enforce == Some(true);
    let fix_missing = query.fix_missing == Some(true);
    if query.fix_dm_scope == Some(true) {
        return Err(ErrorShape::invalid(
            "sessions.cleanup: `fixDmScope` is not supported by pincer, whose chat keys have had one scope from the start (nothing to retire)",
        ));
    }
    if let Some(agent) = query.agent.as_deref()
        && agent != "main"
    {
        return Err(ErrorShape::invalid(format!(
            "unknown agent id \"{agent}\": pincer's gateway has one agent, `main`"
        )));
    }
    let keep = query.active_key.as_deref();
    if let Some(key) = keep {
        hub::check_key("activeKey", key)?;
    }
    let cleaned = hub.clean_keys(fix_missing, keep);
    let mode = if enforce { "enforce" } else { "warn" };
    let summary = system::Cleanup {
        agent_id: "main",
        store_path: cleaned.path,
        mode,
        dry_run: false,
        before_count: cleaned.before,
        after_count: cleaned.after,
        missing: cleaned.missing,
        dm_scope_retired: 0,
        model_run_pruned: 0,
        archived: 0,
        cap_archived: 0,
        pruned: 0,
        capped: 0,
        unreferenced_artifacts: system::Artifacts::default(),
        disk_budget: None,
        would_mutate: cleaned.missing > 0 && !fix_missing,
        applied: true,
        applied_count: cleaned.after,
    };
    if all_agents {
        answer(&system::CleanupAll {
            all_agents: true,
            mode,
            dry_run: false,
            stores: vec![summary],
        })
    } else {
        answer(&summary)
    }
}

/// `wake` (`openclaw system event --mode now`): OpenClaw's system event,
/// text the agent should act on now. pincer sends it to the session
/// (`sessionKey`, else the main one) as a message, after whatever that
/// session is doing, as it does for a background task that ended.
/// `next-heartbeat` (OpenClaw keeps the text for its heartbeat's next
/// run) is refused: pincer's heartbeat runs its HEARTBEAT.md.
pub async fn wake(hub: &Arc<Hub>, conn: &Arc<Conn>, params: Value) -> Reply {
    let query: system::WakeParams = typed("wake", params)?;
    only_main(query.agent_id.as_deref())?;
    if query.mode == system::WakeMode::NextHeartbeat {
        return Err(ErrorShape::invalid(
            "wake: mode `next-heartbeat` is not supported by pincer, whose heartbeat runs its HEARTBEAT.md; use `now` to have the agent act on the text at once",
        ));
    }
    let text = query.text.trim();
    if text.is_empty() {
        return Err(ErrorShape::invalid("text required"));
    }
    let key = query.session_key.as_deref().unwrap_or(MAIN_KEY);
    hub::check_key("sessionKey", key)?;
    let run = format!("wake-{}", uuid::Uuid::new_v4().simple());
    let content = vec![ContentBlock::Text(TextContent::new(format!(
        "System event: {text}"
    )))];
    hub.submit(conn, key, &run, content, Some(QueueMode::FollowUp))
        .await?;
    answer(&system::Ack::OK)
}

/// `config.get`: OpenClaw's config snapshot, as far as pincer's
/// config.toml says what OpenClaw's config would: the gateway's bind,
/// port and auth mode, and the default model and workspace. Never a
/// secret: credentials stay in the environment and files config.toml
/// names, which are not read here. `raw` is `null`: pincer's file is not
/// OpenClaw's config, and is edited by hand (`config.set` is refused).
pub fn config_snapshot(hub: &Hub) -> system::ConfigSnapshot {
    let settings = crate::config::Settings::load_from_process(&hub.cwd);
    let (path, exists, valid, issues, projected) = match &settings {
        Ok(settings) => {
            let path = settings.paths.user_config_file();
            let gateway = settings.config.gateway.clone().unwrap_or_default();
            let bind = gateway.bind.as_deref().unwrap_or("127.0.0.1");
            let bind = match bind {
                "127.0.0.1" | "::1" | "localhost" | "loopback" => "loopback",
                "0.0.0.0" | "::" | "lan" => "lan",
                _ => "custom",
            };
            let model = settings.default_model(None).ok().map(|m| m.full_id());
            let projected = system::ProjectedConfig {
                gateway: system::GatewayConfig {
                    mode: "local",
                    bind,
                    port: gateway.port,
                    auth: system::AuthConfig {
                        mode: gateway.auth.unwrap_or_default().as_str(),
                    },
                },
                agents: system::AgentsConfig {
                    defaults: system::AgentDefaults {
                        model: system::ModelChoice { primary: model },
                        workspace: hub.cwd.clone(),
                    },
                },
            };
            (
                path.clone(),
                path.exists(),
                true,
                Vec::new(),
                Some(projected),
            )
        }
        Err(error) => (
            std::path::PathBuf::new(),
            true,
            false,
            vec![system::ConfigIssue {
                path: String::new(),
                message: error.to_string(),
            }],
            None,
        ),
    };
    let hash = crate::gateway::scheduler::revision(
        &serde_json::to_vec(
            &projected
                .as_ref()
                .map_or(Value::Object(Default::default()), |p| {
                    serde_json::to_value(p).unwrap_or_default()
                }),
        )
        .unwrap_or_default(),
    );
    system::ConfigSnapshot {
        path,
        included_paths: Vec::new(),
        exists,
        valid,
        raw: None,
        parsed: None,
        source_config: projected.clone(),
        resolved: projected.clone(),
        runtime_config: projected.clone(),
        config: projected,
        hash: hash.clone(),
        config_revision_hash: hash.clone(),
        applied_config_hash: hash,
        issues,
        warnings: Vec::new(),
        legacy_issues: Vec::new(),
    }
}
