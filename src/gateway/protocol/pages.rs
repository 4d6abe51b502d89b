//! The params and records of the methods the Control UI's pages beyond
//! the chat read: `environments.list` (Systems), `tasks.list` (Tasks and
//! the chat's side panel), `diagnostics.lanes` (Debug), `plugins.list`,
//! `themes.list`, `worktrees.list`, `transcripts.list` and
//! `migrations.memory.plan` (the shapes are the `openclaw` package's
//! `EnvironmentsListParamsSchema`, `TasksListParamsSchema`,
//! `TasksListResultSchema`, `PluginsListResultSchema` and their
//! handlers'). Where pincer has the thing (the machine it runs on, its
//! helpers, its sessions' queues) the answer is it; where it has not
//! (plugins, managed worktrees, meeting transcripts, another tool's
//! memory) the answer is the empty list, which the page shows as its own
//! "none" state.

use serde::{Deserialize, Serialize};

/// `environments.list`: pincer runs its tools on the gateway's machine,
/// and has no worker profiles for a runtime to narrow, nor a desktop to
/// set up (`includeDesktopSetup`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvironmentsParams {
    pub runtime_id: Option<String>,
    pub projection: Option<Projection>,
    pub include_desktop_setup: Option<bool>,
}

/// `projection: "profiles"`: the worker profiles only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Projection {
    Profiles,
}

/// A machine the agent runs on (OpenClaw's `EnvironmentSummary`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    pub id: &'static str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub label: &'static str,
    pub status: &'static str,
    /// Node's name for the operating system (`linux`, `darwin`, `win32`).
    pub platform: &'static str,
    pub session_host: bool,
    pub trust: &'static str,
    pub capabilities: [&'static str; 4],
}

/// `environments.list`'s answer.
#[derive(Clone, Debug, Serialize)]
pub struct Environments {
    pub environments: Vec<Environment>,
}

impl Environment {
    /// The gateway's own machine, as OpenClaw lists it first. It reports
    /// no desktop (pincer shares none), so there is no desktop setup to
    /// report either, asked for or not: the Systems page then says the
    /// machine has no desktop and its other capabilities remain.
    pub fn gateway() -> Self {
        Self {
            id: "gateway",
            kind: "local",
            label: "Gateway local",
            status: "available",
            platform: match std::env::consts::OS {
                "macos" => "darwin",
                "windows" => "win32",
                other => other,
            },
            session_host: true,
            trust: "persistent",
            capabilities: ["agent.run", "sessions", "tools", "workspace"],
        }
    }
}

/// A task's state (OpenClaw's `TaskStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
    TimedOut,
}

/// One state or several.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Statuses {
    One(TaskStatus),
    Many(Vec<TaskStatus>),
}

impl Statuses {
    pub fn has(&self, status: TaskStatus) -> bool {
        match self {
            Self::One(one) => *one == status,
            Self::Many(many) => many.contains(&status),
        }
    }
}

/// `tasks.list`: pincer's background tasks are its helpers (the sessions
/// its `task` tool starts); `sessionKey` narrows them to one parent's.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TasksParams {
    pub status: Option<Statuses>,
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
    pub limit: Option<u64>,
    /// Where the previous page ended: pincer's cursors are offsets.
    pub cursor: Option<String>,
    pub sort_by: Option<TaskSort>,
}

/// `tasks.list`'s order: by the last change, or by the end (a task not
/// ended last).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TaskSort {
    UpdatedAt,
    EndedAt,
}

/// A helper as OpenClaw's `TaskSummary`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    pub kind: &'static str,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub agent_id: &'static str,
    /// The session whose `task` call started it.
    pub session_key: String,
    /// The helper's own session.
    pub child_session_key: String,
    pub has_transcript: bool,
    pub updated_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `tasks.list`'s answer.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tasks {
    pub tasks: Vec<Task>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One queue of work (OpenClaw's `LaneSnapshot`): in pincer, a session's
/// runs, one at a time.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lane {
    pub lane: String,
    pub queued_count: usize,
    pub active_count: usize,
    pub max_concurrent: usize,
    pub draining: bool,
    pub generation: u64,
    pub blocked_by: Option<&'static str>,
}

/// `diagnostics.lanes`' answer.
#[derive(Clone, Debug, Serialize)]
pub struct Lanes {
    pub ts: u64,
    pub lanes: Vec<Lane>,
    pub dynamic: Option<()>,
}

/// `plugins.list`'s answer: pincer loads no plugins, and installs none.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugins {
    pub plugins: [(); 0],
    pub diagnostics: [(); 0],
    pub mutation_allowed: bool,
}

/// `transcripts.list`: the meeting transcripts OpenClaw captures; pincer
/// captures none, so every query finds none.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TranscriptsParams {
    pub limit: Option<u64>,
    pub cursor: Option<String>,
    pub query: Option<String>,
    pub provider_id: Option<String>,
    pub account_id: Option<String>,
    pub agent_id: Option<String>,
    pub started_after: Option<String>,
    pub started_before: Option<String>,
}

/// `migrations.memory.plan`: importing another tool's memory, which
/// pincer has no importer for.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryPlanParams {
    pub agent_id: String,
    pub overwrite: Option<bool>,
}

/// `skills.status`: the skills a session (or, without one, a session in
/// the gateway's directory) has.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillsStatusParams {
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
}

/// What a skill needs to run (OpenClaw's requirements): pincer's skills
/// declare nothing, so nothing is missing.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    pub bins: [(); 0],
    pub any_bins: [(); 0],
    pub env: [(); 0],
    pub config: [(); 0],
    pub os: [(); 0],
}

/// One skill as OpenClaw's skill status entry: a project's skill is the
/// workspace's, the user's own is "managed" (installed for every
/// project). Every skill pincer found is offered to the model.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillStatus {
    pub name: String,
    pub description: String,
    pub source: &'static str,
    pub bundled: bool,
    pub file_path: String,
    pub base_dir: String,
    pub skill_key: String,
    pub always: bool,
    pub disabled: bool,
    pub blocked_by_allowlist: bool,
    pub blocked_by_agent_filter: bool,
    pub eligible: bool,
    pub platform_incompatible: bool,
    pub model_visible: bool,
    pub user_invocable: bool,
    pub command_visible: bool,
    pub requirements: Requirements,
    pub missing: Requirements,
    pub config_checks: [(); 0],
    pub install: [(); 0],
}

/// `skills.status`' answer.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsStatus {
    pub workspace_dir: String,
    pub managed_skills_dir: String,
    pub agent_id: &'static str,
    pub skills: Vec<SkillStatus>,
}

/// `skills.search`: a search of ClawHub, OpenClaw's skill registry,
/// which pincer does not search.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsSearchParams {
    pub query: Option<String>,
    pub limit: Option<u64>,
}

/// `skills.library.list`: a team's shared skill library.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillsLibraryParams {
    pub session_key: Option<String>,
    pub scope: Option<LibraryScope>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LibraryScope {
    Mine,
    Team,
    All,
}

/// `plugins.catalog.browse`: ClawHub's plugin catalog, which pincer
/// does not browse (it loads no plugins), so every page of it is empty.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogParams {
    pub query: Option<String>,
    pub search_source: Option<String>,
    pub intent: Option<CatalogIntent>,
    pub category: Option<String>,
    pub cursor: Option<String>,
    pub page_size: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CatalogIntent {
    All,
    Bundled,
    Trending,
    Official,
    Featured,
}

/// `agent.identity.get`: the agent's name as the chat shows it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdentityParams {
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
}

/// `talk.catalog`: OpenClaw's voice providers; pincer has no voice
/// features, so no provider of any kind is ready (the chat's microphone
/// menu then says so, in OpenClaw's words).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TalkCatalogParams {
    pub provider: Option<String>,
    pub model: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::params;
    use serde_json::json;

    #[test]
    fn the_pages_params_take_openclaw_s_fields_and_refuse_others() {
        let tasks: TasksParams = params(
            "tasks.list",
            json!({"status": ["completed", "timed_out"], "sortBy": "endedAt", "limit": 5}),
        )
        .unwrap();
        let status = tasks.status.unwrap();
        assert!(status.has(TaskStatus::TimedOut) && !status.has(TaskStatus::Running));
        let one: TasksParams = params("tasks.list", json!({"status": "running"})).unwrap();
        assert!(one.status.unwrap().has(TaskStatus::Running));
        let refused = params::<TasksParams>("tasks.list", json!({"status": "paused"})).unwrap_err();
        assert!(refused.starts_with("tasks.list: `status`"), "{refused}");
        let refused = params::<TasksParams>("tasks.list", json!({"owner": "me"})).unwrap_err();
        assert!(
            refused.starts_with("tasks.list: `owner` is not supported by pincer"),
            "{refused}"
        );
        let refused =
            params::<EnvironmentsParams>("environments.list", json!({"projection": "all"}))
                .unwrap_err();
        assert!(
            refused.starts_with("environments.list: `projection`"),
            "{refused}"
        );
        let refused = params::<MemoryPlanParams>("migrations.memory.plan", json!({})).unwrap_err();
        assert_eq!(refused, "migrations.memory.plan: `agentId` is required");
    }

    #[test]
    fn the_records_serialise_as_openclaw_s() {
        let gateway = serde_json::to_value(Environment::gateway()).unwrap();
        assert_eq!(gateway["type"], "local");
        assert_eq!(gateway["sessionHost"], true);
        assert!(gateway.get("desktopSetup").is_none());
        let plugins = Plugins {
            plugins: [],
            diagnostics: [],
            mutation_allowed: false,
        };
        assert_eq!(
            serde_json::to_value(plugins).unwrap(),
            json!({"plugins": [], "diagnostics": [], "mutationAllowed": false})
        );
        let lanes = Lanes {
            ts: 1,
            lanes: vec![],
            dynamic: None,
        };
        assert_eq!(
            serde_json::to_value(lanes).unwrap(),
            json!({"ts": 1, "lanes": [], "dynamic": null})
        );
        assert_eq!(
            serde_json::to_value(TaskStatus::TimedOut).unwrap(),
            json!("timed_out")
        );
    }
}

/// `worktrees.list`'s answer: pincer manages no git worktrees of its own.
#[derive(Clone, Debug, Serialize)]
pub struct Worktrees {
    pub worktrees: [(); 0],
}

/// `transcripts.list`'s answer: no meeting transcripts.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transcripts {
    pub sessions: [(); 0],
    pub next_cursor: Option<String>,
}

/// `node.list`'s answer: pincer pairs no machines to run tools.
#[derive(Clone, Debug, Serialize)]
pub struct Nodes {
    pub ts: u64,
    pub nodes: [(); 0],
}

/// `plugins.catalog.browse`'s answer: nothing to install.
#[derive(Clone, Debug, Serialize)]
pub struct CatalogItems {
    pub items: [(); 0],
}

/// `agent.identity.get`'s answer: the agent's name (it has no picture).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub agent_id: &'static str,
    pub name: &'static str,
}

/// `progressCard.get`'s answer: the session's card, if it has a plan.
#[derive(Clone, Debug, Serialize)]
pub struct Card {
    pub card: Option<super::chat::ProgressCard>,
}

/// `talk.catalog`'s answer: pincer has no voice features, so no mode,
/// transport or provider is ready.
#[derive(Clone, Debug, Serialize)]
pub struct TalkCatalog {
    pub modes: [(); 0],
    pub transports: [(); 0],
    pub brains: [(); 0],
    pub speech: TalkProviders,
    pub transcription: TalkProviders,
    pub realtime: TalkProviders,
}

#[derive(Clone, Debug, Serialize)]
pub struct TalkProviders {
    pub ready: bool,
    pub providers: [(); 0],
}

impl TalkProviders {
    pub const NONE: Self = Self {
        ready: false,
        providers: [],
    };
}

/// `skills.search`'s answer: pincer searches no skill registry.
#[derive(Clone, Debug, Serialize)]
pub struct SkillResults {
    pub results: [(); 0],
}

/// `themes.list`'s answer: pincer keeps no theme for its clients, so the
/// UI's own default ("claw", following the system's light or dark) is
/// current and there are no more than the UI's built-in ones.
#[derive(Clone, Debug, Serialize)]
pub struct Themes {
    pub current: CurrentTheme,
    pub theme: Theme,
    pub themes: [(); 0],
}

#[derive(Clone, Debug, Serialize)]
pub struct CurrentTheme {
    pub id: &'static str,
    pub mode: &'static str,
    pub scope: &'static str,
    pub overrides: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Theme {
    pub id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub source: &'static str,
    pub modes: [&'static str; 2],
}

/// `migrations.memory.plan`'s answer: no importer, nothing to plan.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryPlan {
    pub agent_id: String,
    pub workspace: std::path::PathBuf,
    pub providers: [(); 0],
}

/// `skills.library.list`'s answer: pincer has no shared skill library, so
/// its lists are empty and nothing can be added to one.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillLibrary {
    pub entries: [(); 0],
    pub profile_id: Option<String>,
    pub multiple_profiles: bool,
    pub default_target: &'static str,
    pub can_manage_workspace: bool,
    pub default_selection_limit: u32,
}

/// `system.info`'s answer: the machine the gateway runs on, as the Systems
/// page shows it. `nodeVersion` is empty: pincer is no Node process.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemInfo {
    pub machine_name: String,
    pub hostname: String,
    pub platform: &'static str,
    pub release: String,
    pub arch: &'static str,
    pub os_label: String,
    pub node_version: &'static str,
    pub pid: u32,
    pub uptime_ms: u64,
    pub cpu_count: usize,
    pub memory_total_bytes: u64,
    pub memory_free_bytes: u64,
    /// Left out where there is none to read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_average: Option<Vec<f64>>,
}
