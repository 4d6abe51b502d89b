//! What the protocol shows of sessions and models, for the wire methods
//! and the in-process clients (chat channels) alike: a session's row
//! (`sessions.list`, a channel's `/status`), the defaults a new session
//! starts with (`hello-ok`), the models the gateway offers and
//! `sessions.patch`'s changes. A session's settings come from its
//! transcript's tail and the configured defaults, so that a listing does
//! not read whole transcripts.

use serde_json::Value;
use std::sync::Arc;

use super::{Failure, Hub, QueueMode, check_key};
use crate::gateway::protocol::models::Model;
use crate::gateway::protocol::sessions::{Helper, Row, RowDefaults, ThinkingOption};
use crate::gateway::protocol::system::{
    Agent, AgentModel, Agents, PermissionMode, SessionDefaults,
};
use crate::llm::ThinkingLevel;

/// What `sessions.patch` changes; a field left `None` stays as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct Patch<'a> {
    /// The user's name for the session (checked by the caller).
    pub label: Option<&'a str>,
    /// A model of the catalog, `provider/id`.
    pub model: Option<&'a str>,
    pub thinking: Option<&'a str>,
    pub permission_mode: Option<&'a str>,
    /// As given: an unknown mode is refused after the options above are
    /// set, as it always was.
    pub queue_mode: Option<&'a str>,
    /// OpenClaw's `verboseLevel` (`off`, `on`, `full`): how much of tool
    /// calls its clients show. The gateway keeps it for them (in memory,
    /// across unloads); the agent does not change.
    pub verbose: Option<&'a str>,
}

/// The verbose levels OpenClaw's clients know.
const VERBOSE_LEVELS: &[&str] = &["off", "on", "full"];

/// Which sessions a listing holds: OpenClaw's `sessions.list` `archived`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Archived {
    /// Those not archived (the default).
    Exclude,
    /// All.
    Include,
    /// The archived ones.
    Only,
}

/// A session as the usage methods count it.
#[derive(Clone, Debug)]
pub struct UsageSession {
    pub key: String,
    pub id: String,
    pub label: Option<String>,
    pub updated_at: u64,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub path: std::path::PathBuf,
}

/// What `sessions.list` asks for.
#[derive(Clone, Copy, Debug)]
pub struct RowQuery<'a> {
    /// Lowercase text the key, id or title holds.
    pub search: Option<&'a str>,
    pub archived: Archived,
    pub offset: usize,
    pub limit: usize,
    /// Only sessions whose transcript changed in the last so many minutes.
    pub active_minutes: Option<u64>,
    /// Each row with `lastMessagePreview`.
    pub last_message: bool,
    /// Only the helpers the session with this key started.
    pub spawned_by: Option<&'a str>,
    /// No helper's session (OpenClaw's `excludeSubagents`).
    pub no_helpers: bool,
    /// Only sessions with a run going or waiting (OpenClaw's `activeOnly`).
    pub busy_only: bool,
}

impl Default for RowQuery<'_> {
    fn default() -> Self {
        Self {
            search: None,
            archived: Archived::Exclude,
            offset: 0,
            limit: 100,
            active_minutes: None,
            last_message: false,
            spawned_by: None,
            no_helpers: false,
            busy_only: false,
        }
    }
}

/// The longest preview of a session's last message, in characters.
const PREVIEW_CHARS: usize = 160;

/// The text of the last user or assistant message of a transcript, on one
/// line and cut to [`PREVIEW_CHARS`]. Only its end is read: 8 KiB, then
/// more (up to 512 KiB) while no whole message line is there, so that a
/// listing of many sessions reads little and a long last reply still has
/// a preview; `None` when there is none.
fn last_message_preview(path: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    for tail in [8 * 1024, 64 * 1024, 512 * 1024] {
        file.seek(SeekFrom::Start(len.saturating_sub(tail))).ok()?;
        let mut bytes = Vec::new();
        (&mut file).take(tail).read_to_end(&mut bytes).ok()?;
        let text = String::from_utf8_lossy(&bytes);
        if let Some(preview) = text.lines().rev().find_map(preview_of) {
            return Some(preview);
        }
        if tail >= len {
            break;
        }
    }
    None
}

/// A transcript line's message text as a preview, if it is a message
/// with text.
fn preview_of(line: &str) -> Option<String> {
    let entry: Value = serde_json::from_str(line).ok()?;
    if entry["type"] != "message" {
        return None;
    }
    let said: Vec<&str> = entry["message"]["content"]
        .as_array()?
        .iter()
        .filter(|part| part["type"] == "text")
        .filter_map(|part| part["text"].as_str())
        .collect();
    let said = said.join(" ");
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    if said.is_empty() {
        return None;
    }
    Some(match said.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}…", &said[..cut]),
        None => said,
    })
}

impl Hub {
    /// `hello-ok`'s `snapshot.sessionDefaults`: what a new session starts
    /// with.
    pub fn session_defaults(&self) -> SessionDefaults {
        session_defaults(self)
    }

    /// The defaults `sessions.list` and `chat.startup` give with their
    /// rows, as OpenClaw's do: the model a new session gets, its thinking
    /// levels, and that the model is chosen per session.
    pub fn row_defaults(&self) -> RowDefaults {
        let defaults = Defaults::load(self);
        let model = defaults.model.as_deref();
        let (provider, id) = match model.and_then(|m| m.split_once('/')) {
            Some((provider, id)) => (Some(provider), Some(id)),
            None => (None, model),
        };
        RowDefaults {
            model_provider: provider.map(String::from),
            model: id.map(String::from),
            context_tokens: defaults.window(model),
            thinking_levels: defaults.levels(model),
            thinking_default: defaults.thinking.clone(),
            model_selection_target: "session",
        }
    }

    /// The thinking level `session` has: its transcript's last choice,
    /// else the configured default (`chat.history`'s `thinkingLevel`).
    pub fn thinking_of(&self, session: Option<&str>) -> String {
        session
            .and_then(|id| crate::session::find(self.data_dir(), id))
            .and_then(|path| recent_settings(&path).thinking)
            .unwrap_or_else(|| Defaults::load(self).thinking)
    }

    /// The sessions the gateway lists (not those a reset replaced) that
    /// `query` keeps, as rows: the page `offset..offset + limit`, and how
    /// many match in all.
    pub fn session_rows_with(&self, query: &RowQuery<'_>) -> (Vec<Row>, usize) {
        let RowQuery {
            search,
            archived,
            offset,
            limit,
            active_minutes,
            last_message,
            spawned_by,
            no_helpers,
            busy_only,
        } = *query;
        let defaults = Defaults::load(self);
        // A helper names its parent by session id; the query, by key.
        let parent = spawned_by.map(|key| self.lookup(key));
        let since = active_minutes.map(|minutes| {
            std::time::SystemTime::now()
                .checked_sub(std::time::Duration::from_secs(minutes.saturating_mul(60)))
                .unwrap_or(std::time::UNIX_EPOCH)
        });
        let matching: Vec<crate::session::Summary> = crate::session::list(self.data_dir(), None)
            .into_iter()
            .filter(|s| since.is_none_or(|since| s.modified() >= since))
            .filter(|s| match archived {
                Archived::Exclude => !self.is_archived(&s.id),
                Archived::Include => true,
                Archived::Only => self.is_archived(&s.id),
            })
            .filter(|s| match search {
                None => true,
                Some(search) => [
                    self.key_of_summary(s),
                    s.id.clone(),
                    s.title.clone().unwrap_or_default(),
                ]
                .iter()
                .any(|v| v.to_lowercase().contains(search)),
            })
            .filter(|s| !no_helpers || s.spawned_by.is_none())
            .filter(|s| match &parent {
                None => true,
                Some(parent) => parent.is_some() && s.spawned_by == *parent,
            })
            .filter(|s| !busy_only || !self.unfinished(&s.id).is_empty())
            .collect();
        let count = matching.len();
        let page: Vec<Row> = matching
            .iter()
            .skip(offset)
            .take(limit)
            .map(|s| {
                let mut row = row(self, s, &defaults);
                if last_message {
                    row.last_message_preview = Some(last_message_preview(&s.path));
                }
                row
            })
            .collect();
        (page, count)
    }

    /// The sessions the usage methods count, newest first: those whose
    /// transcripts changed at or after `since_ms`, or the one `key` names
    /// (none if it names none).
    pub fn usage_sessions(&self, since_ms: i64, key: Option<&str>) -> Vec<UsageSession> {
        let only = match key {
            Some(key) => match self.lookup(key) {
                Some(id) => Some(id),
                None => return Vec::new(),
            },
            None => None,
        };
        let defaults = Defaults::load(self);
        let mut sessions: Vec<UsageSession> = crate::session::list(self.data_dir(), None)
            .into_iter()
            .filter(|s| match &only {
                Some(id) => s.id == *id,
                None => millis(&s.updated_at) as i64 >= since_ms,
            })
            .map(|s| {
                let key = self.key_of_summary(&s);
                let model = recent_settings(&s.path)
                    .model
                    .or_else(|| defaults.model.clone());
                let (provider, model) = match model.as_deref().and_then(|m| m.split_once('/')) {
                    Some((provider, id)) => (Some(provider.to_string()), Some(id.to_string())),
                    None => (None, model),
                };
                UsageSession {
                    key,
                    updated_at: millis(&s.updated_at),
                    label: s.title.clone(),
                    id: s.id,
                    provider,
                    model,
                    path: s.path,
                }
            })
            .collect();
        sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_at));
        sessions
    }

    /// The row of the session `key` names (`sessions.describe`), if it is
    /// listed.
    pub fn row_of(&self, key: &str) -> Option<Row> {
        self.row_with(key, false)
    }

    /// [`Hub::row_of`], with its last message's preview if `last_message`
    /// (as `sessions.list` gives it).
    pub fn row_with(&self, key: &str, last_message: bool) -> Option<Row> {
        let session = self.lookup(key)?;
        crate::session::summary(self.data_dir(), &session)
            .as_ref()
            .map(|s| {
                let mut row = row(self, s, &Defaults::load(self));
                if last_message {
                    row.last_message_preview = Some(last_message_preview(&s.path));
                }
                row
            })
    }

    /// `agents.list`: the gateway's one agent, as OpenClaw lists a roster
    /// that owns its one agent (`ownership: "sole"`), so that OpenClaw's
    /// CLI sends to it without being told which.
    /// The mode new sessions start in (the config's `default_mode`).
    pub fn default_mode(&self) -> crate::agent::Mode {
        Defaults::load(self).mode
    }

    /// The model new sessions start on (`provider/id`), if the config
    /// names one.
    pub fn default_model(&self) -> Option<String> {
        Defaults::load(self).model
    }

    pub fn agents(&self) -> Agents {
        let defaults = Defaults::load(self);
        Agents {
            default_id: "main",
            ownership: "sole",
            selection_required: false,
            main_key: "main",
            scope: "per-sender",
            agents: vec![Agent {
                id: "main",
                name: "pincer",
                kind: "agent",
                workspace: self.cwd.clone(),
                thinking_levels: defaults.levels(defaults.model.as_deref()),
                thinking_default: defaults.thinking.clone(),
                default_permission_mode: defaults.mode.openclaw(),
                model: defaults.model.clone().map(|primary| AgentModel { primary }),
            }],
        }
    }

    /// The models `models.list` offers: those of the catalog whose
    /// provider this gateway can reach.
    pub fn models(&self) -> Result<Vec<Model>, Failure> {
        models(self)
    }

    /// Changes the session `key` names (opened, or created on first use)
    /// and tells the clients that watch sessions; returns the session and
    /// its row. The checks of who may ask are the caller's.
    pub async fn patch(
        self: &Arc<Self>,
        key: &str,
        patch: Patch<'_>,
    ) -> Result<(String, Option<Row>), Failure> {
        check_key("key", key)?;
        if let Some(model) = patch.model {
            known_model(self, model)?;
        }
        if let Some(level) = patch.verbose
            && !VERBOSE_LEVELS.contains(&level)
        {
            return Err(Failure::invalid("`verboseLevel` must be off, on or full"));
        }
        let session = self.open(key).await?;
        let link = self.link()?;
        if let Some(label) = patch.label {
            match self.registry.rename(&session, label) {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    return Err(Failure::invalid(format!(
                        "cannot save the name of session {key}: {e}"
                    )));
                }
                None => {
                    return Err(Failure::invalid(format!(
                        "session {key} is not open; try again"
                    )));
                }
            }
        }
        let options = [
            ("model", crate::acp::MODEL_OPTION, patch.model),
            ("thinkingLevel", crate::acp::THOUGHT_OPTION, patch.thinking),
            (
                "permissionMode",
                crate::acp::MODE_OPTION,
                patch.permission_mode,
            ),
        ];
        for (field, option, value) in options {
            if let Some(value) = value {
                link.set_option(&session, option, value)
                    .await
                    .map_err(|e| {
                        Failure::invalid(format!(
                            "{field}: {}",
                            crate::gateway::link::error_text(&e)
                        ))
                    })?;
            }
        }
        if let Some(mode) = patch.queue_mode {
            let mode = QueueMode::from_wire(mode).ok_or_else(|| {
                Failure::invalid("`queueMode` must be steer, followup, collect or interrupt")
            })?;
            let acp = match mode {
                QueueMode::FollowUp | QueueMode::Collect => "follow-up",
                QueueMode::Steer | QueueMode::Interrupt => "steer",
            };
            link.set_option(&session, crate::acp::QUEUE_OPTION, acp)
                .await
                .map_err(|e| Failure::invalid(crate::gateway::link::error_text(&e)))?;
            self.set_queue_mode(&session, mode);
        }
        if let Some(level) = patch.verbose {
            self.state()
                .live
                .entry(session.clone())
                .or_default()
                .verbose = Some(level.to_string());
        }
        let entry = crate::session::summary(self.data_dir(), &session)
            .map(|s| row(self, &s, &Defaults::load(self)));
        self.announce_patched(key, &session, entry.clone());
        Ok((session, entry))
    }
}

/// An RFC 3339 time (a transcript's) in milliseconds since the epoch.
pub(in crate::gateway) fn millis(rfc3339: &str) -> u64 {
    humantime::parse_rfc3339(rfc3339)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// What a session's transcript ends on: its model, thinking level and
/// permission mode as last set (the last assistant message or change), read
/// from the file's tail so that a listing does not read whole transcripts.
#[derive(Default)]
struct Recent {
    model: Option<String>,
    thinking: Option<String>,
    mode: Option<String>,
    queue: Option<QueueMode>,
}

fn recent_settings(path: &std::path::Path) -> Recent {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 256 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Recent::default();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL)));
    let mut tail = Vec::new();
    let _ = file.take(TAIL).read_to_end(&mut tail);
    let text = String::from_utf8_lossy(&tail);
    let mut recent = Recent::default();
    for line in text.lines().rev() {
        if recent.model.is_some()
            && recent.thinking.is_some()
            && recent.mode.is_some()
            && recent.queue.is_some()
        {
            break;
        }
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match entry["type"].as_str() {
            Some("model_change") if recent.model.is_none() => {
                recent.model = entry["model"].as_str().map(String::from);
            }
            Some("thinking_change") if recent.thinking.is_none() => {
                recent.thinking = entry["level"].as_str().map(String::from);
            }
            Some("mode_change") if recent.mode.is_none() => {
                recent.mode = entry["mode"].as_str().map(String::from);
            }
            Some("queue_change") if recent.queue.is_none() => {
                recent.queue = entry["queue"].as_str().and_then(QueueMode::from_wire);
            }
            Some("message")
                if recent.model.is_none() && entry["message"]["role"] == "assistant" =>
            {
                let message = &entry["message"];
                if let (Some(provider), Some(id)) =
                    (message["provider"].as_str(), message["model"].as_str())
                {
                    recent.model = Some(format!("{provider}/{id}"));
                }
            }
            _ => {}
        }
    }
    recent
}

/// The model, thinking level and mode a session without records of its own
/// has: the configured defaults, read once per request.
struct Defaults {
    settings: Option<crate::config::Settings>,
    model: Option<String>,
    thinking: String,
    mode: crate::agent::Mode,
}

impl Defaults {
    fn load(hub: &Hub) -> Self {
        let settings = crate::config::Settings::load_from_process(&hub.cwd).ok();
        Self {
            model: settings
                .as_ref()
                .and_then(|s| s.default_model(None).ok())
                .map(|m| m.full_id()),
            thinking: settings
                .as_ref()
                .map_or("off", |s| s.thinking().as_str())
                .to_string(),
            mode: settings
                .as_ref()
                .map(|s| s.default_mode())
                .unwrap_or_default(),
            settings,
        }
    }

    /// A model's context window, in tokens.
    fn window(&self, model: Option<&str>) -> Option<u64> {
        let (settings, model) = self.settings.as_ref().zip(model)?;
        settings
            .catalog
            .resolve(model)
            .ok()
            .map(|m| m.context_window)
    }

    /// The thinking levels a model offers (`off` alone without reasoning).
    fn levels(&self, model: Option<&str>) -> Vec<ThinkingOption> {
        let reasoning = self
            .settings
            .as_ref()
            .zip(model)
            .and_then(|(s, m)| s.catalog.resolve(m).ok())
            .is_some_and(|m| m.reasoning);
        let levels: &[ThinkingLevel] = if reasoning {
            &ThinkingLevel::ALL
        } else {
            &[ThinkingLevel::Off]
        };
        levels
            .iter()
            .map(|l| ThinkingOption {
                id: l.as_str(),
                label: l.as_str(),
            })
            .collect()
    }
}

/// `hello-ok`'s `snapshot.sessionDefaults`: OpenClaw's three keys, and
/// what a new session here starts with (its directory, model, thinking
/// level, permission mode and queue mode), so that a client such as
/// `pincer acp --connect` can show a session's options before it has a
/// transcript.
fn session_defaults(hub: &Hub) -> SessionDefaults {
    let defaults = Defaults::load(hub);
    SessionDefaults {
        default_agent_id: "main",
        main_key: "main",
        main_session_key: super::MAIN_KEY,
        cwd: hub.cwd.clone(),
        thinking_levels: defaults.levels(defaults.model.as_deref()),
        model: defaults.model,
        thinking_level: defaults.thinking,
        permission_mode: defaults.mode.id(),
        permission_modes: crate::agent::Mode::ALL
            .iter()
            .map(|m| PermissionMode {
                id: m.id(),
                name: m.name(),
                description: m.description(),
            })
            .collect(),
        queue_mode: QueueMode::Steer.wire(),
    }
}

fn row(hub: &Hub, summary: &crate::session::Summary, defaults: &Defaults) -> Row {
    let title = summary.title.clone().unwrap_or_default();
    let recent = recent_settings(&summary.path);
    let model = recent.model.or_else(|| defaults.model.clone());
    let thinking = recent.thinking.unwrap_or_else(|| defaults.thinking.clone());
    let (provider, model_id) = match model.as_deref().and_then(|m| m.split_once('/')) {
        Some((provider, id)) => (Some(provider.to_string()), Some(id.to_string())),
        None => (None, model.clone()),
    };
    let mode = recent
        .mode
        .as_deref()
        .and_then(crate::agent::Mode::parse)
        .unwrap_or(defaults.mode);
    // A helper's transcript's end is the last word on how it ended;
    // without one it runs, or ran in a process that was killed.
    let helper = summary.spawned_by.as_ref().map(|parent| {
        let parent_key = hub.key_of(parent);
        let state = match summary.helper_stop.as_deref() {
            Some("cancelled") => "stopped",
            Some("error" | "refusal") => "failed",
            Some(_) => "done",
            None if hub.is_running_helper(&summary.id) => "running",
            None => "interrupted",
        };
        Helper {
            parent_session_key: parent_key.clone(),
            spawned_by: parent_key,
            parent_tool_call_id: summary.call.clone(),
            subagent: summary.agent.clone(),
            helper_state: state,
            interrupted: state == "interrupted",
        }
    });
    let usage = usage_fields(hub, summary, model.as_deref(), defaults);
    Row {
        key: hub.key_of_summary(summary),
        session_id: summary.id.clone(),
        kind: "direct",
        updated_at: millis(&summary.updated_at),
        label: summary.label.clone(),
        derived_title: title.clone(),
        display_name: title,
        spawned_cwd: summary.cwd.clone(),
        model: model_id,
        model_provider: provider,
        thinking_level: thinking,
        thinking_levels: defaults.levels(model.as_deref()),
        mode: mode.id(),
        permission_mode: (mode != defaults.mode).then(|| mode.openclaw()).flatten(),
        queue_mode: hub
            .queue_mode(&summary.id)
            .or(recent.queue)
            .map(|m| m.wire()),
        verbose_level: hub.verbose_of(&summary.id),
        archived: hub.is_archived(&summary.id),
        archived_at: hub.archived_at(&summary.id),
        helper,
        total_tokens: usage.tokens,
        total_tokens_fresh: usage.tokens.is_some(),
        context_tokens: usage.window,
        cost_usd: usage.cost,
        last_message_preview: None,
        activity_summary: None,
    }
}

/// What a row says of a session's use.
struct Usage {
    tokens: Option<u64>,
    window: Option<u64>,
    cost: f64,
}

/// A row's usage: OpenClaw's `totalTokens` (the tokens in the context now,
/// with `totalTokensFresh`) and `contextTokens` (the model's window), and
/// the session's cost so far, from the last report of a session that ran
/// in this process, else from its transcript.
fn usage_fields(
    hub: &Hub,
    summary: &crate::session::Summary,
    model: Option<&str>,
    defaults: &Defaults,
) -> Usage {
    let recorded = hub.recorded_usage(&summary.path);
    let live = hub.live_usage(&summary.id).unwrap_or_default();
    Usage {
        tokens: live.context_tokens.or(recorded.context_tokens),
        window: live.context_window.or_else(|| defaults.window(model)),
        cost: live.cost_usd.unwrap_or(recorded.cost_usd),
    }
}

/// Refuses a model that `models.list` would not offer: `sessions.patch`
/// takes a model from the catalog (built in, or from the user's
/// providers), not any string that names a provider. Whether its
/// credential is present is the session's own check (as in `pincer acp`).
fn known_model(hub: &Hub, model: &str) -> Result<(), Failure> {
    let settings = crate::config::Settings::load_from_process(&hub.cwd)
        .map_err(|e| Failure::invalid(e.to_string()))?;
    let resolved = settings
        .catalog
        .resolve(model)
        .map_err(|e| Failure::invalid(format!("model: {e}")))?;
    let full_id = resolved.full_id();
    if settings
        .catalog
        .listed_models()
        .any(|m| m.full_id() == full_id)
    {
        return Ok(());
    }
    Err(Failure::invalid(format!(
        "model: unknown model `{model}`; `models.list` names the models this gateway offers (a model of your own is listed under [[providers.<name>.models]] in the config)"
    )))
}

fn models(hub: &Hub) -> Result<Vec<Model>, Failure> {
    let settings = crate::config::Settings::load_from_process(&hub.cwd)
        .map_err(|e| Failure::invalid(e.to_string()))?;
    let models = settings
        .catalog
        .listed_models()
        .filter(|m| settings.can_offer(m))
        .map(|m| Model {
            id: m.full_id(),
            name: m.name.clone(),
            provider: m.provider.clone(),
            context_window: m.context_window,
            reasoning: m.reasoning,
            // OpenClaw's published catalog's fields: what the model reads,
            // and that its credential is here (`can_offer`).
            input: if m.image_input {
                vec!["text", "image"]
            } else {
                vec!["text"]
            },
            available: true,
        })
        .collect();
    Ok(models)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::registry::Registry;
    use crate::session::transcript;
    use serde_json::json;
    use std::time::Duration;

    /// A helper's transcript is written before the hub hears that it
    /// started: a listing made in between names it by the key every later
    /// event and listing use (not by its bare id, which the page would
    /// show as a second helper), and that key opens it. With no end in
    /// its transcript and nothing running it, it was interrupted.
    #[test]
    fn a_helper_the_hub_has_not_heard_of_is_listed_under_its_own_key() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let hub = Hub::new(
            Registry::new(),
            dir.path().to_path_buf(),
            data.clone(),
            Duration::from_secs(60),
        );
        let child = "sess_0123456789abcdef0123456789abcdef";
        let header = transcript::Header::new(child, dir.path(), None).spawned(
            "sess_parent",
            "general-purpose",
            "t1",
        );
        let path = crate::session::transcript_path(&data, dir.path(), child);
        let mut writer = transcript::Writer::create(&path, &header).unwrap();
        writer
            .append(transcript::Record::Message {
                message: crate::llm::Message::User {
                    content: vec![crate::llm::Content::text("read the docs")],
                },
                time: None,
            })
            .unwrap();

        let all = RowQuery {
            archived: Archived::Include,
            limit: 10,
            ..RowQuery::default()
        };
        let (rows, count) = hub.session_rows_with(&all);
        assert_eq!(count, 1);
        let key = format!("agent:main:subagent:{child}");
        // As the clients read it.
        let row = json!(rows[0]);
        assert_eq!(row["key"], json!(key));
        assert_eq!(row["parentToolCallId"], json!("t1"));
        assert_eq!(row["helperState"], json!("interrupted"));
        assert_eq!(row["interrupted"], json!(true));
        assert!(row.get("lastMessagePreview").is_none(), "{row}");
        assert_eq!(hub.lookup(&key).as_deref(), Some(child));
        assert_eq!(hub.row_of(&key).unwrap().key, key);
        // Searching by that key finds it.
        let (found, _) = hub.session_rows_with(&RowQuery {
            search: Some("subagent:sess_0123"),
            ..all
        });
        assert_eq!(found.len(), 1);
        // The preview of a last message longer than the first tail read.
        let long = "word ".repeat(4000);
        writer
            .append(transcript::Record::Message {
                message: crate::llm::Message::User {
                    content: vec![crate::llm::Content::text(format!("{long}end"))],
                },
                time: None,
            })
            .unwrap();
        let preview = last_message_preview(&path).unwrap();
        assert!(
            preview.starts_with("word word") && preview.ends_with('…'),
            "{preview}"
        );
        assert_eq!(preview.chars().count(), PREVIEW_CHARS + 1);
        // A key of that form for a session that is not there names nothing.
        assert_eq!(hub.lookup("agent:main:subagent:sess_nothere"), None);
    }
}
