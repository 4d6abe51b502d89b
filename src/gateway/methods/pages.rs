//! The methods the Control UI's pages beyond the chat read (their params
//! and records are [`protocol::pages`](crate::gateway::protocol::pages)):
//! the machine pincer runs on, its skills, its helpers as background
//! tasks, its sessions' queues, the agent's plan as the chat's progress
//! card, and the empty lists of what pincer has not got.

use std::sync::Arc;

use serde_json::Value;

use super::{Need, NoParams, Reply, checked_key, need, only_main, typed};
use crate::gateway::conn::Conn;
use crate::gateway::frames::{ErrorShape, UNAVAILABLE, answer, now_ms};
use crate::gateway::hub::{self, Hub};
use crate::gateway::protocol::chat;
use crate::gateway::protocol::pages::{
    Card, CatalogItems, CurrentTheme, Identity, MemoryPlan, Nodes, SkillLibrary, SkillResults,
    SystemInfo, TalkCatalog, TalkProviders, Theme, Themes, Transcripts, Worktrees,
};
use crate::gateway::protocol::pages::{
    CatalogParams, Environment, Environments, EnvironmentsParams, IdentityParams, Lane, Lanes,
    MemoryPlanParams, Plugins, Projection, Requirements, SkillStatus, SkillsLibraryParams,
    SkillsSearchParams, SkillsStatus, SkillsStatusParams, TalkCatalogParams, Task, TaskSort,
    TaskStatus, Tasks, TasksParams, TranscriptsParams,
};

/// The methods of this file, for `hello-ok`.
pub(super) const METHODS: &[&str] = &[
    "environments.list",
    "tasks.list",
    "diagnostics.lanes",
    "plugins.list",
    "themes.list",
    "worktrees.list",
    "transcripts.list",
    "migrations.memory.plan",
    "skills.status",
    "skills.search",
    "skills.library.list",
    "system.info",
    "node.list",
    "plugins.catalog.browse",
    "agent.identity.get",
    "talk.catalog",
    "progressCard.get",
];

/// Runs `method`, one of [`METHODS`].
pub(super) async fn run(hub: &Arc<Hub>, conn: &Conn, method: &str, params: Value) -> Reply {
    match method {
        "environments.list" => {
            need(conn, Need::Read)?;
            let query: EnvironmentsParams = typed("environments.list", params)?;
            answer(&environments(query))
        }
        "tasks.list" => {
            need(conn, Need::Read)?;
            tasks(hub, typed("tasks.list", params)?).await
        }
        "diagnostics.lanes" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("diagnostics.lanes", params)?;
            answer(&lanes(hub))
        }
        "plugins.list" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("plugins.list", params)?;
            answer(&plugins())
        }
        "themes.list" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("themes.list", params)?;
            answer(&themes())
        }
        // pincer manages no git worktrees of its own.
        "worktrees.list" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("worktrees.list", params)?;
            answer(&Worktrees { worktrees: [] })
        }
        // Meeting transcripts: pincer captures none.
        "transcripts.list" => {
            need(conn, Need::Read)?;
            let query: TranscriptsParams = typed("transcripts.list", params)?;
            only_main(query.agent_id.as_deref())?;
            answer(&Transcripts {
                sessions: [],
                next_cursor: None,
            })
        }
        "migrations.memory.plan" => {
            need(conn, Need::Admin)?;
            memory_plan(hub, typed("migrations.memory.plan", params)?)
        }
        "system.info" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("system.info", params)?;
            answer(&system_info(hub))
        }
        // The machines paired to run tools: pincer pairs none (its other
        // node methods, pairing first, are refused).
        "node.list" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("node.list", params)?;
            answer(&Nodes {
                ts: now_ms(),
                nodes: [],
            })
        }
        "plugins.catalog.browse" => {
            need(conn, Need::Read)?;
            let query: CatalogParams = typed("plugins.catalog.browse", params)?;
            if query.query.is_some() && query.cursor.is_some() {
                return Err(ErrorShape::invalid(
                    "plugins.catalog.browse: `query` and `cursor` cannot be sent together",
                ));
            }
            answer(&CatalogItems { items: [] })
        }
        // The name pincer's Control UI config gives (it has no picture).
        "agent.identity.get" => {
            need(conn, Need::Read)?;
            let query: IdentityParams = typed("agent.identity.get", params)?;
            only_main(query.agent_id.as_deref())?;
            if let Some(key) = &query.session_key {
                checked_key("sessionKey", key)?;
            }
            answer(&Identity {
                agent_id: "main",
                name: "pincer",
            })
        }
        "progressCard.get" => {
            need(conn, Need::Read)?;
            let query: chat::CardParams = typed("progressCard.get", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?;
            let card = hub.lookup(key).and_then(|session| hub.card(&session));
            answer(&Card {
                card: card.map(|card| chat::ProgressCard {
                    session_key: key.to_string(),
                    revision: card.revision,
                    updated_at: card.updated_at,
                    steps: card
                        .steps
                        .into_iter()
                        .map(|(step, status)| chat::ProgressStep { step, status })
                        .collect(),
                }),
            })
        }
        "talk.catalog" => {
            need(conn, Need::Read)?;
            let _: TalkCatalogParams = typed("talk.catalog", params)?;
            answer(&TalkCatalog {
                modes: [],
                transports: [],
                brains: [],
                speech: TalkProviders::NONE,
                transcription: TalkProviders::NONE,
                realtime: TalkProviders::NONE,
            })
        }
        "skills.status" => {
            need(conn, Need::Read)?;
            skills(hub, typed("skills.status", params)?).await
        }
        // ClawHub, OpenClaw's skill registry: pincer searches none, so a
        // search finds nothing (the page still shows the skills here).
        "skills.search" => {
            need(conn, Need::Read)?;
            let query: SkillsSearchParams = typed("skills.search", params)?;
            if query.limit.is_some_and(|n| !(1..=100).contains(&n)) {
                return Err(ErrorShape::invalid(
                    "skills.search: `limit` must be from 1 to 100",
                ));
            }
            answer(&SkillResults { results: [] })
        }
        "skills.library.list" => {
            need(conn, Need::Read)?;
            let query: SkillsLibraryParams = typed("skills.library.list", params)?;
            if let Some(key) = &query.session_key {
                checked_key("sessionKey", key)?;
            }
            answer(&skill_library())
        }
        other => Err(ErrorShape::invalid(format!("unknown method: {other}"))),
    }
}

/// The most tasks one answer carries (OpenClaw's limit).
const MAX_TASKS: u64 = 500;

/// `environments.list`: the gateway's machine (pincer pairs no others).
fn environments(query: EnvironmentsParams) -> Environments {
    let environments = match query.projection {
        // Worker profiles only: pincer has none.
        Some(Projection::Profiles) => Vec::new(),
        None => vec![Environment::gateway()],
    };
    Environments { environments }
}

/// `diagnostics.lanes`: each session with work, as a lane of one run at a
/// time, with what waits in it.
fn lanes(hub: &Hub) -> Lanes {
    let mut lanes: Vec<Lane> = hub
        .queues()
        .into_iter()
        .map(|(session, running, waiting)| Lane {
            lane: format!("session:{}", hub.key_of(&session)),
            queued_count: waiting,
            active_count: usize::from(running),
            max_concurrent: 1,
            draining: false,
            generation: 0,
            blocked_by: (!running && waiting > 0).then_some("lane"),
        })
        .collect();
    lanes.sort_by(|a, b| a.lane.cmp(&b.lane));
    Lanes {
        ts: now_ms(),
        lanes,
        dynamic: None,
    }
}

/// `plugins.list`: none (pincer loads no plugins, and installs none).
fn plugins() -> Plugins {
    Plugins {
        plugins: [],
        diagnostics: [],
        mutation_allowed: false,
    }
}

/// `tasks.list`: the helpers pincer's `task` tool started, newest first
/// (or by their end), as OpenClaw's background tasks; `sessionKey` keeps
/// those one session started. The transcripts are listed off the
/// runtime's workers.
async fn tasks(hub: &Arc<Hub>, query: TasksParams) -> Reply {
    only_main(query.agent_id.as_deref())?;
    let limit = match query.limit {
        None => 100,
        Some(n @ 1..=MAX_TASKS) => n as usize,
        Some(_) => {
            return Err(ErrorShape::invalid(format!(
                "tasks.list: `limit` must be from 1 to {MAX_TASKS}"
            )));
        }
    };
    let offset = match query.cursor.as_deref() {
        None => 0,
        Some(cursor) => cursor.parse::<usize>().map_err(|_| {
            ErrorShape::invalid("invalid or expired tasks.list cursor; list again from the start")
        })?,
    };
    if let Some(key) = &query.session_key {
        super::checked_key("sessionKey", key)?;
    }
    let hub = hub.clone();
    crate::parallel::ANSWERS
        .run(move || {
            let parent = match query.session_key.as_deref() {
                None => None,
                Some(key) => match hub.lookup(key) {
                    Some(id) => Some(id),
                    None => {
                        return Tasks {
                            tasks: Vec::new(),
                            next_cursor: None,
                        };
                    }
                },
            };
            let mut tasks: Vec<Task> = crate::session::list(hub.data_dir(), None)
                .into_iter()
                .filter_map(|summary| {
                    let spawned_by = summary.spawned_by.as_ref()?;
                    if parent.as_ref().is_some_and(|p| p != spawned_by) {
                        return None;
                    }
                    let task = task(&hub, &summary, spawned_by);
                    query
                        .status
                        .as_ref()
                        .is_none_or(|wanted| wanted.has(task.status))
                        .then_some(task)
                })
                .collect();
            if query.sort_by == Some(TaskSort::EndedAt) {
                // Ended ones by their end, newest first; those still going last.
                tasks.sort_by_key(|task| std::cmp::Reverse(task.ended_at));
            }
            let more = tasks.len() > offset.saturating_add(limit);
            let tasks: Vec<Task> = tasks.into_iter().skip(offset).take(limit).collect();
            Tasks {
                tasks,
                next_cursor: more.then(|| (offset + limit).to_string()),
            }
        })
        .await
        .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("listing the tasks failed: {e}")))
        .and_then(|tasks| answer(&tasks))
}

/// A helper's session as a task; its transcript's end says how it ended
/// (as its session row's `helperState` does).
fn task(hub: &Hub, summary: &crate::session::Summary, parent: &str) -> Task {
    let status = match summary.helper_stop.as_deref() {
        Some("cancelled") => TaskStatus::Cancelled,
        Some("error" | "refusal") => TaskStatus::Failed,
        Some(_) => TaskStatus::Completed,
        None if hub.is_running_helper(&summary.id) => TaskStatus::Running,
        // It ran in a pincer that was stopped or killed.
        None => TaskStatus::Failed,
    };
    let updated_at = hub::millis(&summary.updated_at);
    let title = summary
        .title
        .clone()
        .or_else(|| summary.agent.clone())
        .filter(|t| !t.is_empty());
    Task {
        id: summary.id.clone(),
        kind: "subagent",
        status,
        title,
        agent_id: "main",
        session_key: hub.key_of(parent),
        child_session_key: hub.key_of(&summary.id),
        has_transcript: true,
        updated_at,
        ended_at: (status != TaskStatus::Running).then_some(updated_at),
        error: (status == TaskStatus::Failed && summary.helper_stop.is_none())
            .then(|| "interrupted: the pincer that ran it stopped".to_string()),
    }
}

/// `themes.list`: pincer keeps no theme for its clients, so the UI's own
/// default ("claw", following the system's light or dark) is current and
/// there are no more to offer than the UI's built-in ones.
fn themes() -> Themes {
    Themes {
        current: CurrentTheme {
            id: "claw",
            mode: "system",
            scope: "gateway",
            overrides: Default::default(),
        },
        theme: Theme {
            id: "claw",
            name: "Claw",
            description: "OpenClaw's default theme",
            source: "builtin",
            modes: ["light", "dark"],
        },
        themes: [],
    }
}

/// `migrations.memory.plan`: pincer has no importer of another tool's
/// memory, so there is nothing to plan.
fn memory_plan(hub: &Hub, query: MemoryPlanParams) -> Reply {
    only_main(Some(&query.agent_id))?;
    answer(&MemoryPlan {
        agent_id: query.agent_id,
        workspace: hub.cwd.clone(),
        providers: [],
    })
}

/// `skills.status`: the skills a session in the session's directory (or
/// the gateway's) is offered, found as the agent finds them (the
/// project's, then the user's), read off the runtime's workers.
async fn skills(hub: &Arc<Hub>, query: SkillsStatusParams) -> Reply {
    only_main(query.agent_id.as_deref())?;
    let session = match query.session_key.as_deref() {
        None => None,
        Some(key) => {
            super::checked_key("sessionKey", key)?;
            Some(
                hub.lookup(key)
                    .ok_or_else(|| ErrorShape::invalid("Session not found."))?,
            )
        }
    };
    let hub = hub.clone();
    crate::parallel::ANSWERS
        .run(move || {
            let cwd = session
                .and_then(|id| crate::session::summary(hub.data_dir(), &id))
                .map_or_else(|| hub.cwd.clone(), |summary| summary.cwd);
            let settings = crate::config::Settings::load_from_process(&cwd).map_err(|e| {
                ErrorShape::new(UNAVAILABLE, format!("reading the config failed: {e}"))
            })?;
            let sources = crate::context::Sources::from_settings(&settings, &cwd);
            let managed = sources.config_dir.join("skills");
            let (found, _problems) = crate::context::skills::discover(&sources);
            let skills = found
                .into_iter()
                .map(|skill| SkillStatus {
                    source: if skill.dir.starts_with(&managed) {
                        "openclaw-managed"
                    } else {
                        "openclaw-workspace"
                    },
                    bundled: false,
                    file_path: skill.path.display().to_string(),
                    base_dir: skill.dir.display().to_string(),
                    skill_key: skill.name.clone(),
                    name: skill.name,
                    description: skill.description,
                    always: false,
                    disabled: false,
                    blocked_by_allowlist: false,
                    blocked_by_agent_filter: false,
                    eligible: true,
                    platform_incompatible: false,
                    model_visible: true,
                    user_invocable: true,
                    command_visible: true,
                    requirements: Requirements::default(),
                    missing: Requirements::default(),
                    config_checks: [],
                    install: [],
                })
                .collect();
            answer(&SkillsStatus {
                workspace_dir: cwd.display().to_string(),
                managed_skills_dir: managed.display().to_string(),
                agent_id: "main",
                skills,
            })
        })
        .await
        .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("listing the skills failed: {e}")))?
}

/// `skills.library.list`: pincer has no shared skill library, so its
/// lists are empty and nothing can be added to one.
fn skill_library() -> SkillLibrary {
    SkillLibrary {
        entries: [],
        profile_id: None,
        multiple_profiles: false,
        default_target: "workspace",
        can_manage_workspace: false,
        default_selection_limit: 64,
    }
}

/// `system.info`: the machine the gateway runs on, as the Systems page
/// shows it (read from `/proc` where there is one; a figure it cannot
/// read is 0, a name empty). `nodeVersion` is empty: pincer is no Node
/// process.
fn system_info(hub: &Hub) -> SystemInfo {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|text| text.trim().to_string())
            .unwrap_or_default()
    };
    let hostname = read("/proc/sys/kernel/hostname");
    let release = read("/proc/sys/kernel/osrelease");
    let meminfo = read("/proc/meminfo");
    // `/proc/meminfo` counts in KiB.
    let memory = |field: &str| {
        meminfo
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib.saturating_mul(1024))
    };
    let platform = Environment::gateway().platform;
    let os = match platform {
        "linux" => "Linux",
        "darwin" => "Darwin",
        "win32" => "Windows_NT",
        other => other,
    };
    let info = SystemInfo {
        machine_name: hostname.trim_end_matches(".local").to_string(),
        hostname: hostname.clone(),
        platform,
        arch: match std::env::consts::ARCH {
            "x86_64" => "x64",
            "aarch64" => "arm64",
            "x86" => "ia32",
            other => other,
        },
        os_label: format!("{os} {release}").trim().to_string(),
        release,
        node_version: "",
        pid: std::process::id(),
        uptime_ms: hub.started.elapsed().as_millis() as u64,
        cpu_count: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_total_bytes: memory("MemTotal"),
        memory_free_bytes: memory("MemAvailable"),
        load_average: None,
    };
    let load: Vec<f64> = read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .filter_map(|n| n.parse().ok())
        .collect();
    SystemInfo {
        load_average: (load.len() == 3 && load.iter().any(|n| *n > 0.0)).then_some(load),
        ..info
    }
}
