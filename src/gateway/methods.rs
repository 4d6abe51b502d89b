//! The gateway's methods, the wire's table on top of the hub: each checks
//! its scope and its params, then calls the hub's typed API (which the
//! in-process clients, chat channels and the scheduler, call directly)
//! and shapes its answer. The table in docs/gateway.md lists them with
//! their params and results.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, ImageContent, TextContent};
use serde_json::{Value, json};

use super::conn::{Conn, Need, Out};
use super::frames::{self, Answer, ErrorShape, FORBIDDEN, Request, UNAVAILABLE, answer, now_ms};
use super::hub::{self, Archived, Hub, MAIN_KEY, Outcome, Patch, not_found};
use crate::config::QueueMode;
use crate::gateway::protocol::system::{self as system_types, Ack};
use crate::gateway::protocol::{NoParams, approvals, chat, cron, models, sessions};
use history::{cut_to_bytes, history};

mod chat_page;
mod commands;
mod history;
mod pages;
mod system;
mod usage;

/// The methods this file serves; with the pages' ([`pages::METHODS`]),
/// `hello-ok` advertises them ([`advertised`]).
const METHODS: &[&str] = &[
    "health",
    "status",
    "system-presence",
    "last-heartbeat",
    "config.get",
    "channels.status",
    "commands.list",
    "sessions.cleanup",
    "wake",
    "chat.send",
    "chat.abort",
    "chat.history",
    "chat.startup",
    "chat.subscribe",
    "chat.unsubscribe",
    "agent",
    "agent.wait",
    "sessions.list",
    "sessions.resolve",
    "sessions.get",
    "sessions.patch",
    "sessions.create",
    "sessions.describe",
    "question.list",
    "sessions.reset",
    "sessions.delete",
    "sessions.compact",
    "sessions.rewind",
    "sessions.fork",
    "sessions.subscribe",
    "sessions.unsubscribe",
    "sessions.messages.subscribe",
    "sessions.messages.unsubscribe",
    "models.list",
    "agents.list",
    "exec.approval.get",
    "exec.approval.list",
    "plugin.approval.list",
    "openclaw.approval.list",
    "exec.approval.resolve",
    "cron.list",
    "cron.status",
    "cron.get",
    "cron.runs",
    "logs.tail",
    "sessions.usage",
    "sessions.usage.timeseries",
    "sessions.usage.logs",
    "usage.cost",
    "usage.status",
];

/// Every method pincer serves, for `hello-ok`'s `features.methods`.
pub fn advertised() -> Vec<&'static str> {
    METHODS
        .iter()
        .chain(pages::METHODS)
        .chain(chat_page::METHODS)
        .copied()
        .collect()
}

/// The OpenClaw server capabilities pincer has, for `hello-ok`'s
/// `features.capabilities` (OpenClaw's CLI checks them before a call):
/// `models.list` publishes the catalog this gateway offers.
pub const CAPABILITIES: &[&str] = &["published-model-catalog"];

/// Every event, for `hello-ok`.
pub const EVENTS: &[&str] = &[
    "chat",
    "agent",
    "tick",
    "session.message",
    "sessions.changed",
    "exec.approval.requested",
    "exec.approval.resolved",
    "cron",
    "progressCard.changed",
];

type Reply = Result<Answer, ErrorShape>;

/// Runs one request; the answer (or answers, for `agent`) go to the
/// client's outbox.
pub async fn call(hub: &Arc<Hub>, conn: &Arc<Conn>, request: Request) {
    let id = request.id.clone();
    let result = dispatch(hub, conn, request).await;
    let frame = match result {
        Ok(payload) => frames::ok(&id, &payload),
        Err(error) => frames::error(&id, &error),
    };
    conn.out.push(Out::Frame(frame));
}

fn need(conn: &Conn, need: Need) -> Result<(), ErrorShape> {
    if conn.scopes.allows(need) {
        return Ok(());
    }
    Err(
        ErrorShape::new(FORBIDDEN, format!("missing scope: {}", need.scope())).details(json!({
            "code": "MISSING_SCOPE",
            "missingScope": need.scope(),
            "requiredScopes": need.granted_by(),
        })),
    )
}

async fn dispatch(hub: &Arc<Hub>, conn: &Arc<Conn>, request: Request) -> Reply {
    let params = if request.params.is_null() {
        json!({})
    } else {
        request.params
    };
    if !params.is_object() {
        return Err(ErrorShape::invalid("`params` must be an object"));
    }
    match request.method.as_str() {
        "health" => {
            need(conn, Need::Read)?;
            let _: system_types::HealthParams = typed("health", params)?;
            answer(&system_types::Health {
                ok: true,
                uptime_ms: hub.started.elapsed().as_millis() as u64,
            })
        }
        "status" => {
            need(conn, Need::Read)?;
            let query: crate::gateway::protocol::StatusParams = typed("status", params)?;
            if query.include_cli_projection == Some(true) {
                return Err(ErrorShape::invalid(
                    "status: `includeCliProjection` is not supported by pincer, which has no OpenClaw CLI config to project",
                ));
            }
            answer(&reading(hub, |hub| Ok(status(hub))).await?)
        }
        "system-presence" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("system-presence", params)?;
            answer(&hub.presence())
        }
        "last-heartbeat" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("last-heartbeat", params)?;
            answer(
                &hub.scheduled
                    .get()
                    .and_then(|scheduled| scheduled.last_heartbeat()),
            )
        }
        "config.get" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("config.get", params)?;
            answer(&system::config_snapshot(hub))
        }
        "channels.status" => {
            need(conn, Need::Read)?;
            system::channels_status(hub, params)
        }
        "commands.list" => {
            need(conn, Need::Read)?;
            commands::list(hub, params)
        }
        "sessions.cleanup" => {
            need(conn, Need::Admin)?;
            // Every key's transcript is looked for on disk.
            let hub = hub.clone();
            crate::parallel::ANSWERS
                .run(move || system::sessions_cleanup(&hub, params))
                .await
                .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("cleanup failed: {e}")))?
        }
        "wake" => {
            need(conn, Need::Write)?;
            system::wake(hub, conn, params).await
        }
        "chat.send" => {
            need(conn, Need::Write)?;
            let query: chat::SendParams = typed("chat.send", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?.to_string();
            send(hub, conn, &key, Outgoing::from(query))
                .await
                .and_then(|(run_id, status)| answer(&chat::Sent { run_id, status }))
        }
        "agent" => {
            need(conn, Need::Write)?;
            let query: chat::AgentParams = typed("agent", params)?;
            only_main(query.agent_id.as_deref())?;
            agent(hub, conn, &request.id, query).await
        }
        "agent.wait" => {
            need(conn, Need::Read)?;
            agent_wait(hub, typed("agent.wait", params)?).await
        }
        "chat.abort" => {
            need(conn, Need::Write)?;
            let query: chat::AbortParams = typed("chat.abort", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?;
            let runs = match hub.elsewhere(key).await {
                Some(elsewhere) => {
                    hub.abort_elsewhere(&elsewhere, query.run_id.as_deref())
                        .await?
                }
                None => hub.abort_key(key, query.run_id.as_deref())?,
            };
            answer(&chat::Aborted {
                ok: true,
                aborted: runs.is_some(),
                run_ids: runs.unwrap_or_default(),
            })
        }
        "chat.history" | "chat.startup" => {
            need(conn, Need::Read)?;
            let query: chat::HistoryParams = typed(&request.method, params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?;
            let limit = query.limit.map_or(200, |n| n.min(1000) as usize);
            let max_bytes = query.max_bytes;
            // OpenClaw's Control UI opens a chat with `chat.startup`: the
            // history, the session's state and the defaults it shows. All
            // of it is read from files, off the runtime's workers.
            let startup = request.method == "chat.startup";
            let elsewhere = hub.transcript_elsewhere(key).await;
            let answer = off_runtime(hub, key, move |hub, key| {
                let (session, mut messages) = history(hub, key, limit, elsewhere)?;
                let total = messages.len();
                let has_more = cut_to_bytes(&mut messages, max_bytes);
                let startup = startup.then(|| chat::Startup {
                    has_more,
                    total_messages: total,
                    session_info: session_info(hub, key, session.as_deref()),
                    defaults: hub.row_defaults(),
                });
                Ok(chat::History {
                    session_key: key.to_string(),
                    thinking_level: hub.thinking_of(session.as_deref()),
                    verbose_level: session.as_deref().map(|s| hub.verbose_of(s)),
                    session_id: session,
                    messages,
                    startup,
                })
            })
            .await?;
            match &answer.session_id {
                Some(session) => hub.follow(conn, session),
                None => hub.follow_key(conn, key),
            }
            self::answer(&answer)
        }
        "sessions.messages.subscribe" | "sessions.messages.unsubscribe" => {
            need(conn, Need::Read)?;
            let query: chat::MessagesSubscribeParams = typed(&request.method, params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("key", &query.key)?;
            let session = hub.lookup(key);
            if request.method == "sessions.messages.subscribe" {
                match &session {
                    Some(session) => hub.follow(conn, session),
                    None => match hub.elsewhere(key).await {
                        Some(elsewhere) => hub.follow(conn, &elsewhere.session),
                        None => hub.follow_key(conn, key),
                    },
                }
            } else {
                hub.unfollow(conn, key, session.as_deref());
            }
            answer(&chat::MessagesSubscribed {
                subscribed: request.method == "sessions.messages.subscribe",
                key: key.to_string(),
            })
        }
        "chat.subscribe" => {
            need(conn, Need::Read)?;
            let query: chat::SubscribeParams = typed("chat.subscribe", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?;
            if let Some(session) = hub.lookup(key) {
                hub.follow(conn, &session);
            } else if let Some(elsewhere) = hub.elsewhere(key).await {
                // Another replica of the cluster runs it: its events come
                // over the bus.
                hub.follow(conn, &elsewhere.session);
            } else if conn.scopes.allows(Need::Write) {
                let session = hub.open(key).await?;
                hub.follow(conn, &session);
            } else {
                // A reader watches sessions that exist; it creates none.
                hub.follow_key(conn, key);
            }
            answer(&Ack::OK)
        }
        "chat.unsubscribe" => {
            need(conn, Need::Read)?;
            let query: chat::SubscribeParams = typed("chat.unsubscribe", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?;
            let session = hub.lookup(key);
            hub.unfollow(conn, key, session.as_deref());
            answer(&Ack::OK)
        }
        "sessions.get" => {
            need(conn, Need::Read)?;
            let query: chat::GetParams = typed("sessions.get", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("key", &query.key)?;
            let limit = query.limit.map_or(1000, |n| n as usize);
            let elsewhere = hub.transcript_elsewhere(key).await;
            let (session, messages) = off_runtime(hub, key, move |hub, key| {
                history(hub, key, limit, elsewhere)
            })
            .await?;
            if let Some(session) = &session {
                hub.follow(conn, session);
            }
            answer(&chat::Messages {
                key: key.to_string(),
                session_id: session,
                messages,
            })
        }
        "sessions.list" => {
            need(conn, Need::Read)?;
            let query: sessions::ListParams = typed("sessions.list", params)?;
            // In a team gateway, the other replicas' sessions too.
            let elsewhere = hub.rows_elsewhere(rows_asked(&query)).await;
            answer(&reading(hub, move |hub| list(hub, query, elsewhere)).await?)
        }
        "sessions.resolve" => {
            need(conn, Need::Read)?;
            let query = typed("sessions.resolve", params)?;
            answer(&reading(hub, move |hub| resolve(hub, query)).await?)
        }
        "sessions.patch" => {
            need(conn, Need::Write)?;
            patch(hub, conn, typed("sessions.patch", params)?).await
        }
        "sessions.create" => {
            need(conn, Need::Write)?;
            create(hub, conn, typed("sessions.create", params)?).await
        }
        // OpenClaw's questions to the user: pincer asks its own (a
        // command to allow, `ask_user`) as approvals, so it has none of
        // these to list.
        "question.list" => {
            need(conn, Need::Read)?;
            let _: approvals::QuestionListParams = typed("question.list", params)?;
            answer(&approvals::Questions {
                questions: Vec::new(),
            })
        }
        // OpenClaw's TUI reads a session's row after each run.
        "sessions.describe" => {
            need(conn, Need::Read)?;
            let query: sessions::DescribeParams = typed("sessions.describe", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("key", &query.key)?;
            // Rows always have their derived title.
            let last = query.include_last_message == Some(true);
            let row = off_runtime(hub, key, move |hub, key| Ok(hub.row_with(key, last))).await?;
            answer(&sessions::Described {
                key: key.to_string(),
                session: row,
            })
        }
        "sessions.reset" => {
            need(conn, Need::Write)?;
            // Both reasons (`/new`, `/reset`) give the key a fresh session.
            let query: sessions::ResetParams = typed("sessions.reset", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("key", &query.key)?;
            let session = hub.reset(key, query.expected_session_id.as_deref()).await?;
            answer(&sessions::Changed {
                ok: true,
                key: key.to_string(),
                session_id: session,
                entry: None,
            })
        }
        "sessions.delete" => {
            // Deleting only what is archived is a writer's to do, as in
            // OpenClaw; any other deletion is an admin's.
            let query: sessions::DeleteParams = typed("sessions.delete", params)?;
            let archived_only = query.archived_only == Some(true);
            need(
                conn,
                if archived_only {
                    Need::Write
                } else {
                    Need::Admin
                },
            )?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("key", &query.key)?;
            if query.delete_transcript == Some(false) {
                return Err(ErrorShape::invalid(
                    "sessions.delete: keeping the transcript (`deleteTranscript: false`) is not supported by pincer, which deletes a session with its transcript; archive it to keep it (sessions.patch `archived`)",
                ));
            }
            let deleted = hub
                .delete_key(key, archived_only, query.expected_session_id.as_deref())
                .await?;
            answer(&sessions::Deleted {
                ok: true,
                key: key.to_string(),
                deleted,
            })
        }
        "sessions.compact" => {
            need(conn, Need::Write)?;
            let query: sessions::CompactParams = typed("sessions.compact", params)?;
            only_main(query.agent_id.as_deref())?;
            if query.max_lines.is_some() {
                return Err(ErrorShape::invalid(
                    "sessions.compact: `maxLines` (cutting a transcript to its last lines) is not supported by pincer, which compacts by summarising the older history; leave it out",
                ));
            }
            let key = checked_key("key", &query.key)?;
            let instructions = query.instructions.as_deref().unwrap_or_default();
            let text = format!("/compact {instructions}").trim_end().to_string();
            run_command(hub, key, text, "the compaction was cancelled").await?;
            // What the compaction did is what the transcript says after
            // the command: a summary, or the reason there is none.
            let path = hub
                .lookup(key)
                .and_then(|session| crate::session::find(hub.data_dir(), &session))
                .ok_or_else(|| not_found(key))?;
            let ended = crate::parallel::ANSWERS
                .run(move || compaction_of(&path))
                .await
                .map_err(|e| ErrorShape::invalid(e.to_string()))?;
            let key = key.to_string();
            answer(&match ended {
                Compaction::Done { tokens_before } => sessions::Compacted {
                    ok: true,
                    key,
                    compacted: true,
                    result: Some(sessions::CompactResult { tokens_before }),
                    reason: None,
                },
                Compaction::NotNeeded(reason) => sessions::Compacted {
                    ok: true,
                    key,
                    compacted: false,
                    result: None,
                    reason: Some(reason),
                },
                Compaction::Failed(reason) => sessions::Compacted {
                    ok: false,
                    key,
                    compacted: false,
                    result: None,
                    reason: Some(reason),
                },
            })
        }
        "sessions.rewind" => {
            need(conn, Need::Write)?;
            let query: sessions::RewindParams = typed("sessions.rewind", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("key", &query.key)?;
            let (turn, message) = (query.turn, query.message_id);
            let turn = off_runtime(hub, key, move |hub, key| {
                turn_param(hub, key, turn, message.as_deref())
            })
            .await?
            .ok_or_else(|| ErrorShape::invalid("`turn` or `messageId` is required"))?;
            // Through the session, as `/rewind N` typed there: the question
            // about the files goes to whoever answers its approvals.
            run_command(
                hub,
                key,
                format!("/rewind {turn}"),
                "the rewind was cancelled",
            )
            .await?;
            answer(&sessions::Rewound {
                ok: true,
                key: key.to_string(),
                turn,
            })
        }
        "sessions.fork" => {
            need(conn, Need::Write)?;
            let query: sessions::ForkParams = typed("sessions.fork", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("key", &query.key)?;
            let (turn, message) = (query.turn, query.message_id.clone());
            let turn = off_runtime(hub, key, move |hub, key| {
                turn_param(hub, key, turn, message.as_deref())
            })
            .await?;
            let point = match turn {
                Some(turn) => crate::session::rewind::ForkPoint::BeforeTurn(turn),
                None => crate::session::rewind::ForkPoint::Whole,
            };
            let (new_key, session) = hub.fork(key, &point, query.new_key.as_deref())?;
            answer(&sessions::Forked {
                ok: true,
                key: new_key,
                session_id: session,
                parent_key: key.to_string(),
            })
        }
        "sessions.subscribe" | "sessions.unsubscribe" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed(&request.method, params)?;
            let subscribed = request.method == "sessions.subscribe";
            conn.sessions_changed
                .store(subscribed, std::sync::atomic::Ordering::Relaxed);
            answer(&sessions::Subscribed {
                ok: true,
                subscribed,
            })
        }
        "agents.list" => {
            need(conn, Need::Read)?;
            let _: NoParams = typed("agents.list", params)?;
            answer(&reading(hub, |hub| Ok(hub.agents())).await?)
        }
        "models.list" => {
            need(conn, Need::Read)?;
            let query: models::ListParams = typed("models.list", params)?;
            only_main(query.agent_id.as_deref())?;
            if let Some(key) = &query.session_key {
                checked_key("sessionKey", key)?;
            }
            // OpenClaw's CLI narrows the list to one provider.
            let provider = query.provider.as_deref();
            if let Some(view) = query.view.as_deref()
                && !matches!(view, "default" | "all" | "configured")
            {
                return Err(ErrorShape::invalid(format!(
                    "models.list: the `{view}` view is not supported by pincer, whose one catalog is the models it is configured with"
                )));
            }
            if query.refresh == Some(true) {
                return Err(ErrorShape::invalid(
                    "models.list: `refresh` (discovering a provider's models) is not supported by pincer; its catalog is the one it is configured with",
                ));
            }
            let models = reading(hub, |hub| hub.models()).await?;
            answer(&models::Listed {
                models: models
                    .into_iter()
                    .filter(|m| provider.is_none_or(|p| m.provider == p))
                    .collect(),
            })
        }
        "exec.approval.get" => {
            if !conn.scopes.allows(Need::Read) {
                need(conn, Need::Approvals)?;
            }
            let query: approvals::GetParams = typed("exec.approval.get", params)?;
            match hub.approval(&query.id) {
                Some(approval) => answer(&approval),
                None => answer(
                    &hub.approval_elsewhere(&query.id)
                        .ok_or_else(|| not_found(&query.id))?,
                ),
            }
        }
        "exec.approval.list" => {
            if !conn.scopes.allows(Need::Read) {
                need(conn, Need::Approvals)?;
            }
            let _: NoParams = typed("exec.approval.list", params)?;
            // OpenClaw's shape: the pending approvals themselves, this
            // replica's and those of the cluster's other replicas.
            let mut all: Vec<Box<serde_json::value::RawValue>> = hub
                .approvals()
                .iter()
                .filter_map(|a| serde_json::value::to_raw_value(a).ok())
                .collect();
            all.extend(hub.approvals_elsewhere());
            answer(&all)
        }
        // pincer's questions are all `exec` approvals: it has no plugins
        // and no system agent to ask anything else (OpenClaw's clients
        // list all three together).
        "plugin.approval.list" | "openclaw.approval.list" => {
            if !conn.scopes.allows(Need::Read) {
                need(conn, Need::Approvals)?;
            }
            let _: NoParams = typed(&request.method, params)?;
            answer(&[(); 0])
        }
        "exec.approval.resolve" => {
            need(conn, Need::Approvals)?;
            let query: approvals::ResolveParams = typed("exec.approval.resolve", params)?;
            if hub.is_asked_elsewhere(&query.id) {
                hub.resolve_elsewhere(&query.id, &query.decision).await?;
            } else {
                hub.resolve_approval(&query.id, &query.decision)?;
            }
            answer(&Ack::OK)
        }
        "cron.list" => {
            need(conn, Need::Read)?;
            let query: cron::ListParams = typed("cron.list", params)?;
            only_main(query.agent_id.as_deref())?;
            if query.include_delivery_previews == Some(true) {
                return Err(ErrorShape::invalid(
                    "cron.list: `includeDeliveryPreviews` is not supported by pincer, whose jobs deliver to the channel they name",
                ));
            }
            if query.limit == Some(0) {
                return Err(ErrorShape::invalid("cron.list: `limit` must be 1 or more"));
            }
            // The jobs, the heartbeat and the jobs that do not run, from
            // one read of the runs' file, off the runtime's workers.
            let (records, listing) = reading(hub, |hub| {
                Ok(match hub.scheduled.get() {
                    Some(scheduled) => scheduled.listed(),
                    None => (Vec::new(), json!({"jobs": [], "heartbeat": null})),
                })
            })
            .await?;
            let mut jobs: Vec<cron::Job> =
                records.into_iter().filter(|job| query.keeps(job)).collect();
            query.sort(&mut jobs);
            let snapshot_revision =
                crate::gateway::scheduler::revision(&serde_json::to_vec(&jobs).unwrap_or_default());
            let total = jobs.len();
            let (offset, limit, page) = cron::page(&jobs, query.offset, query.limit);
            let next = offset + page.len();
            let has_more = next < total;
            let page = cron::Page {
                jobs: page,
                snapshot_revision,
                total,
                offset,
                limit,
                has_more,
                next_offset: has_more.then_some(next),
                heartbeat: None,
                invalid: None,
            };
            if query.compact == Some(true) {
                return answer(
                    &page.map(|jobs| jobs.iter().map(cron::CompactJob::from).collect::<Vec<_>>()),
                );
            }
            // pincer's own page also shows the heartbeat and the jobs that
            // do not run (their config is wrong).
            let invalid = listing["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|job| {
                    Some(cron::Invalid {
                        name: job["name"].as_str()?.to_string(),
                        error: job["error"].as_str()?.to_string(),
                    })
                })
                .collect();
            answer(&cron::Page {
                heartbeat: Some(listing["heartbeat"].clone()),
                invalid: Some(invalid),
                ..page
            })
        }
        "cron.status" => {
            need(conn, Need::Read)?;
            let _: cron::NoParams = typed("cron.status", params)?;
            let jobs = reading(hub, |hub| Ok(cron_records(hub))).await?;
            let status = cron::Status {
                enabled: hub.scheduled.get().is_some(),
                triggers_enabled: false,
                store_path: hub
                    .scheduled
                    .get()
                    .map(|s| s.store_path().display().to_string())
                    .unwrap_or_default(),
                jobs: jobs.len(),
                next_wake_at_ms: jobs.iter().filter_map(|j| j.state.next_run_at_ms).min(),
            };
            answer(&status)
        }
        "cron.get" => {
            need(conn, Need::Read)?;
            let query: cron::JobParams = typed("cron.get", params)?;
            reading(hub, |hub| Ok(cron_records(hub)))
                .await?
                .into_iter()
                .find(|job| job.id == query.id)
                .ok_or_else(|| no_job(&query.id))
                .and_then(|job| answer(&job))
        }
        "logs.tail" => {
            need(conn, Need::Read)?;
            let query: crate::gateway::logs::TailParams = typed("logs.tail", params)?;
            let path = crate::gateway::logs::path(hub.data_dir());
            let tail = crate::parallel::ANSWERS
                .run(move || crate::gateway::logs::tail(&path, &query))
                .await
                .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("log read failed: {e}")))?
                .map_err(|e| ErrorShape::new(UNAVAILABLE, e))?;
            answer(&tail)
        }
        "cron.runs" => {
            need(conn, Need::Read)?;
            for (field, why) in [
                ("deliveryStatuses", "delivery statuses"),
                ("deliveryStatus", "delivery statuses"),
                ("runId", "run ids"),
            ] {
                if !params[field].is_null() {
                    return Err(ErrorShape::invalid(format!(
                        "cron.runs: `{field}` is not supported by pincer, which records no {why} of its runs"
                    )));
                }
            }
            let query: cron::RunsParams = typed("cron.runs", params)?;
            only_main(query.agent_id.as_deref())?;
            if query.limit == Some(0) {
                return Err(ErrorShape::invalid("cron.runs: `limit` must be 1 or more"));
            }
            let mut entries: Vec<cron::RunEntry> = reading(hub, |hub| Ok(cron_records(hub)))
                .await?
                .iter()
                .filter_map(cron::RunEntry::last_of)
                .filter(|entry| query.keeps(entry))
                .collect();
            entries.sort_by_key(|entry| entry.ts);
            if query.sort_dir != Some(cron::SortDir::Asc) {
                entries.reverse();
            }
            let total = entries.len();
            let (offset, limit, page) =
                cron::page(&entries, query.offset, Some(query.limit.unwrap_or(50)));
            let next = offset + page.len();
            answer(&cron::RunsPage {
                entries: page,
                total,
                offset,
                limit,
                has_more: next < total,
                next_offset: (next < total).then_some(next),
            })
        }
        "sessions.usage" => {
            need(conn, Need::Read)?;
            usage::sessions(hub, params).await
        }
        "sessions.usage.timeseries" => {
            need(conn, Need::Read)?;
            usage::detail(hub, "sessions.usage.timeseries", params, false).await
        }
        "sessions.usage.logs" => {
            need(conn, Need::Read)?;
            usage::detail(hub, "sessions.usage.logs", params, true).await
        }
        "usage.cost" => {
            need(conn, Need::Read)?;
            usage::cost(hub, params).await
        }
        "usage.status" => {
            need(conn, Need::Read)?;
            usage::status(params)
        }
        "connect" => Err(ErrorShape::invalid("already connected")),
        other if pages::METHODS.contains(&other) => pages::run(hub, conn, other, params).await,
        other if chat_page::METHODS.contains(&other) => {
            chat_page::run(hub, conn, other, params).await
        }
        other => Err(ErrorShape::invalid(match openclaw_only(other) {
            Some(what) => format!("not supported by pincer: `{other}` is {what}"),
            None => format!("unknown method: {other}"),
        })),
    }
}

/// The `[[cron]]` jobs as OpenClaw's records.
fn cron_records(hub: &Hub) -> Vec<cron::Job> {
    hub.scheduled
        .get()
        .map(|scheduled| scheduled.records())
        .unwrap_or_default()
}

/// OpenClaw's answer for a job id it does not know.
fn no_job(id: &str) -> ErrorShape {
    ErrorShape::invalid(format!(
        "no cron job `{id}`: pincer's jobs are the `[[cron]]` entries of its config.toml, by name"
    ))
    .details(json!({"code": "CRON_JOB_NOT_FOUND", "id": id}))
}

/// A method's params as their type ([`protocol::params`]).
fn typed<T: serde::de::DeserializeOwned>(method: &str, params: Value) -> Result<T, ErrorShape> {
    crate::gateway::protocol::params(method, params).map_err(ErrorShape::invalid)
}

/// The prompt of a `chat.send` or `agent`: its text and attachments.
fn content(
    message: &str,
    attachments: &[chat::Attachment],
) -> Result<Vec<ContentBlock>, ErrorShape> {
    let mut blocks = vec![ContentBlock::Text(TextContent::new(message))];
    for (i, item) in attachments.iter().enumerate() {
        blocks.push(attachment(i, item)?);
    }
    Ok(blocks)
}

/// One attachment as a prompt block: an image, or a text file (what
/// `pincer acp --connect` makes of an editor's embedded resource), which
/// the agent reads as an embedded resource named `attachment:NAME`.
fn attachment(i: usize, item: &chat::Attachment) -> Result<ContentBlock, ErrorShape> {
    use base64::Engine;
    let kind = item.kind.as_deref().unwrap_or("image");
    let mime = item.mime_type.as_deref().unwrap_or_default();
    let data = match &item.content {
        None | Some(Value::Null) => "",
        Some(Value::String(data)) => data,
        Some(_) => {
            return Err(ErrorShape::invalid(format!(
                "attachments[{i}].content must be a string (base64 or a data URL)"
            )));
        }
    };
    // A browser reads a file as a data URL (`FileReader.readAsDataURL`):
    // its base64 body is the content, its type the default `mimeType`.
    let (mime, data) = match data
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((url_mime, body)) if mime.is_empty() => (url_mime, body),
        Some((_, body)) => (mime, body),
        None => (mime, data),
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| ErrorShape::invalid(format!("attachments[{i}].content is not base64")))?;
    if kind == "image" && mime.starts_with("image/") {
        return Ok(ContentBlock::Image(ImageContent::new(data, mime)));
    }
    if kind == "file" {
        let Ok(text) = String::from_utf8(decoded) else {
            return Err(ErrorShape::invalid(format!(
                "attachments[{i}]: only text files are accepted (this one is not UTF-8)"
            )));
        };
        let name = item
            .file_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .map_or_else(|| format!("attachment-{}", i + 1), String::from);
        let mime = if mime.is_empty() { "text/plain" } else { mime };
        let block = json!({
            "type": "resource",
            "resource": {"uri": format!("attachment:{name}"), "mimeType": mime, "text": text},
        });
        return serde_json::from_value(block)
            .map_err(|e| ErrorShape::invalid(format!("attachments[{i}]: {e}")));
    }
    Err(ErrorShape::invalid(format!(
        "attachments[{i}]: only images (`type: \"image\"`, an image/* `mimeType`) and text files \
         (`type: \"file\"`) are accepted"
    )))
}

/// The key OpenClaw's CLI gives a session it names by id.
const EXPLICIT_PREFIX: &str = "agent:main:explicit:";

/// `chat.send` and `agent`: the run id and the ack status.
/// What `chat.send` and `agent` send, from either's params.
struct Outgoing {
    /// The session the client means (see [`chat::SendParams`]).
    session_id: Option<String>,
    message: String,
    attachments: Vec<chat::Attachment>,
    thinking: Option<String>,
    deliver: bool,
    /// The run's timeout in milliseconds; `0` is none, as in OpenClaw.
    timeout_ms: Option<u64>,
    queue_mode: Option<String>,
    run: String,
    expected_leaf: Option<String>,
}

impl From<chat::SendParams> for Outgoing {
    fn from(p: chat::SendParams) -> Self {
        Self {
            session_id: p.session_id,
            message: p.message,
            attachments: p.attachments.unwrap_or_default(),
            thinking: p.thinking,
            deliver: p.deliver == Some(true),
            timeout_ms: p.timeout_ms,
            queue_mode: p.queue_mode,
            run: p.idempotency_key,
            expected_leaf: p.expected_leaf_entry_id,
        }
    }
}

impl From<chat::AgentParams> for Outgoing {
    /// `timeout` is in seconds; `timeoutMs` wins when both are given.
    fn from(p: chat::AgentParams) -> Self {
        Self {
            session_id: p.session_id,
            message: p.message,
            attachments: p.attachments.unwrap_or_default(),
            thinking: p.thinking,
            deliver: p.deliver == Some(true),
            timeout_ms: p.timeout_ms.or(p.timeout.map(|s| s.saturating_mul(1000))),
            queue_mode: p.queue_mode,
            run: p.idempotency_key,
            expected_leaf: None,
        }
    }
}

async fn send(
    hub: &Arc<Hub>,
    conn: &Arc<Conn>,
    key: &str,
    out: Outgoing,
) -> Result<(String, &'static str), ErrorShape> {
    let run = out.run.as_str();
    hub::check_run_id(run)?;
    // A repeated key answers before its message is read again.
    if let Some(status) = hub.known_run(run) {
        return Ok((run.to_string(), status));
    }
    let blocks = content(&out.message, &out.attachments)?;
    let session = hub.lookup(key);
    if let Some(expected) = out.session_id.as_deref()
        && session.as_deref() != Some(expected)
        && key.strip_prefix(EXPLICIT_PREFIX) != Some(expected)
    {
        return Err(ErrorShape::invalid(format!(
            "{key} does not name session {expected} (now: {})",
            session.as_deref().unwrap_or("no session yet")
        )));
    }
    // OpenClaw's per-message thinking override: pincer's level is the
    // session's, so a message may only ask for the one it has.
    if let Some(thinking) = out.thinking.as_deref() {
        let has = hub.thinking_of(session.as_deref());
        if thinking != has {
            return Err(ErrorShape::invalid(format!(
                "a message's own thinking level (`thinking: {thinking}`) is not supported by pincer: the session thinks at `{has}`; set its thinkingLevel (sessions.patch) first"
            )));
        }
    }
    if out.deliver {
        return Err(ErrorShape::invalid(
            "`deliver: true` is not supported by pincer: a chat channel's session gets its replies on its channel, and other sessions have nowhere to deliver to",
        ));
    }
    // pincer's transcripts have no branches for a message to be sent on:
    // only "wherever the session is" (`null`) is taken.
    if out.expected_leaf.is_some() {
        return Err(ErrorShape::invalid(
            "`expectedLeafEntryId` (sending on a branch of the transcript) is not supported by pincer; send it as null",
        ));
    }
    let timeout = out
        .timeout_ms
        .filter(|ms| *ms > 0)
        .map(std::time::Duration::from_millis);
    let mode = match out.queue_mode.as_deref() {
        None => None,
        Some(mode) => Some(QueueMode::from_wire(mode).ok_or_else(|| {
            ErrorShape::invalid("`queueMode` must be steer, followup, collect or interrupt")
        })?),
    };
    let status = match hub.elsewhere(key).await {
        Some(elsewhere) => {
            hub.send_elsewhere(conn, &elsewhere, run, blocks, mode, false)
                .await?
        }
        None => hub.submit(conn, key, run, blocks, mode).await?,
    };
    // A run that outlives its timeout is stopped, as OpenClaw's agent
    // timeout stops it.
    if let Some(timeout) = timeout {
        let (hub, key, run) = (hub.clone(), key.to_string(), run.to_string());
        tokio::spawn(async move {
            let ended = match hub.wait_for(&run) {
                Some(waiter) => tokio::time::timeout(timeout, waiter).await.is_ok(),
                None => true,
            };
            if !ended {
                tracing::debug!(%run, "the run reached its timeout; stopping it");
                let _ = hub.abort_key(&key, Some(&run));
            }
        });
    }
    Ok((run.to_string(), status))
}

async fn agent(hub: &Arc<Hub>, conn: &Arc<Conn>, id: &str, query: chat::AgentParams) -> Reply {
    let given = match query.session_key.as_deref() {
        Some(key) => checked_key("sessionKey", key)?,
        None => MAIN_KEY,
    };
    // `openclaw agent --session-id X` names the session by id, with the
    // key its config gives (the main key, `agent:main:explicit:X`, or
    // none): pincer's session X if there is one, else the session of the
    // key `agent:main:explicit:X` (made on the first run, continued on
    // the next).
    let key = match query.session_id.as_deref() {
        Some(wanted) if hub.lookup(given).as_deref() != Some(wanted) => {
            hub::check_key("sessionId", wanted)?;
            if hub.lookup(wanted).as_deref() == Some(wanted) {
                wanted.to_string()
            } else {
                let key = format!("{EXPLICIT_PREFIX}{wanted}");
                hub::check_key("sessionId", &key)?;
                key
            }
        }
        _ => given.to_string(),
    };
    let key = key.as_str();
    let (run, status) = send(hub, conn, key, Outgoing::from(query)).await?;
    let accepted = chat::AgentAccepted {
        run_id: run.clone(),
        session_key: key.to_string(),
        agent_id: "main",
        status: if status == "started" {
            "accepted"
        } else {
            status
        },
        accepted_at: now_ms(),
    };
    conn.out.push(Out::Frame(frames::ok(id, &accepted)));
    if let Some(waiter) = hub.wait_for(&run) {
        let _ = waiter.await;
    }
    let (outcome, text, _) = hub
        .outcome(&run)
        .flatten()
        .ok_or_else(|| ErrorShape::invalid("the run is gone"))?;
    answer(&final_result(&run, &outcome, &text))
}

fn final_result(run: &str, outcome: &Outcome, text: &str) -> chat::AgentDone {
    let (status, error, stop) = match outcome {
        Outcome::Ok { stop } => ("ok", None, *stop),
        Outcome::Aborted => ("error", Some("aborted".to_string()), "aborted"),
        Outcome::Error { message, .. } => ("error", Some(message.clone()), "error"),
    };
    chat::AgentDone {
        run_id: run.to_string(),
        status,
        summary: error.clone().unwrap_or_else(|| text.to_string()),
        error,
        // `payloads` is the reply as OpenClaw's CLI prints it.
        result: chat::AgentReply {
            text: text.to_string(),
            stop_reason: stop,
            payloads: payloads(text),
        },
    }
}

/// `status`: OpenClaw's status summary, as far as pincer has its parts:
/// the process, the sessions (the ten most recent) and no degraded
/// plugins or secrets (pincer has neither).
fn status(hub: &Hub) -> system_types::Status {
    let (recent, count) = hub.session_rows_with(&hub::RowQuery {
        search: None,
        archived: Archived::Exclude,
        offset: 0,
        limit: 10,
        ..hub::RowQuery::default()
    });
    let defaults = hub.row_defaults();
    system_types::Status {
        pid: std::process::id(),
        uptime_ms: hub.started.elapsed().as_millis() as u64,
        degraded_secret_owners: Vec::new(),
        degraded_plugins: Vec::new(),
        sessions: system_types::StatusSessions {
            paths: Vec::new(),
            count,
            defaults: system_types::StatusDefaults {
                model: defaults.model,
                context_tokens: defaults.context_tokens,
            },
            recent,
        },
    }
}

/// What an OpenClaw method pincer does not serve belongs to, for a refusal
/// that says so rather than "unknown method" (OpenClaw's CLI prints it).
fn openclaw_only(method: &str) -> Option<&'static str> {
    let families: &[(&str, &str)] = &[
        (
            "node.",
            "part of OpenClaw's nodes (paired machines that run tools); pincer runs its tools itself",
        ),
        (
            "device.",
            "part of OpenClaw's device pairing; pincer's clients prove the gateway's token or password",
        ),
        (
            "plugin.",
            "part of OpenClaw's plugins, which pincer does not load",
        ),
        (
            "plugins.",
            "part of OpenClaw's plugins, which pincer does not load",
        ),
        (
            "talk.",
            "part of OpenClaw's voice features, which pincer does not have",
        ),
        (
            "tts.",
            "part of OpenClaw's voice features, which pincer does not have",
        ),
        (
            "voicewake.",
            "part of OpenClaw's voice features, which pincer does not have",
        ),
        (
            "canvas.",
            "part of OpenClaw's canvas, which pincer does not have",
        ),
        (
            "board.",
            "part of OpenClaw's board, which pincer does not have",
        ),
        ("cron.add", CRON_IN_CONFIG),
        ("cron.update", CRON_IN_CONFIG),
        ("cron.remove", CRON_IN_CONFIG),
        (
            "cron.run",
            "a run on demand; pincer runs its `[[cron]]` jobs at their times (send the job's prompt to its session to run it now)",
        ),
        (
            "system-event",
            "an event from one of OpenClaw's nodes (paired machines), which pincer does not have",
        ),
        (
            "set-heartbeats",
            "turning the heartbeat on or off while the gateway runs; pincer's heartbeat is the `[heartbeat]` of its config.toml: edit it there and restart the gateway",
        ),
        (
            "message.",
            "a message sent to a chat channel on demand (`openclaw message send`); pincer's channels answer the chats that write to them, and its `[[cron]]` jobs and heartbeat deliver to a chat",
        ),
        (
            "sessions.companion.",
            "part of OpenClaw's side chat (questions about a session answered beside it), which pincer does not have",
        ),
        (
            "sessions.observer.",
            "part of OpenClaw's session observer (a model's running digest of how a run goes), which pincer does not have",
        ),
        (
            "sessions.branches.switch",
            "a switch between a session's branches; a pincer session has one path (a rewind cuts it back)",
        ),
        (
            "config.",
            "a change to OpenClaw's config; pincer's is its config.toml, edited by hand (`config.get` shows what of it OpenClaw's clients read)",
        ),
    ];
    families
        .iter()
        .find(|(prefix, _)| method.starts_with(prefix))
        .map(|(_, what)| *what)
}

/// Why `cron.add`, `cron.update` and `cron.remove` are refused.
const CRON_IN_CONFIG: &str = "a change to a job; pincer's scheduled jobs are the `[[cron]]` entries of its config.toml: edit them there and restart the gateway";

/// A run's reply as OpenClaw's `result.payloads` (none for no text).
fn payloads(text: &str) -> Vec<chat::Payload> {
    if text.trim().is_empty() {
        Vec::new()
    } else {
        vec![chat::Payload {
            text: text.to_string(),
        }]
    }
}

async fn agent_wait(hub: &Arc<Hub>, query: chat::WaitParams) -> Reply {
    let run = query.run_id.as_str();
    let timeout = query.timeout_ms.unwrap_or(30_000);
    let Some(state) = hub.outcome(run) else {
        return Err(ErrorShape::invalid(format!("unknown run {run}")));
    };
    if state.is_none()
        && let Some(waiter) = hub.wait_for(run)
    {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(timeout), waiter).await;
    }
    let waited = |status, terminal_reply, error| chat::Waited {
        run_id: run.to_string(),
        status,
        terminal_reply,
        error,
    };
    answer(&match hub.outcome(run).flatten() {
        None => waited("timeout", None, None),
        Some((Outcome::Ok { .. }, text, _)) => waited(
            "ok",
            Some(chat::TerminalReply {
                disposition: "visible",
                text,
            }),
            None,
        ),
        Some((Outcome::Aborted, _, _)) => waited("error", None, Some("aborted".to_string())),
        Some((Outcome::Error { message, .. }, _, _)) => waited("error", None, Some(message)),
    })
}

/// Sends a slash command to the session `key` names, as a message typed
/// there, and waits for it to end; `cancelled` is the error when it was.
async fn run_command(
    hub: &Arc<Hub>,
    key: &str,
    text: String,
    cancelled: &str,
) -> Result<(), ErrorShape> {
    let session = hub.open(key).await?;
    let run = uuid::Uuid::new_v4().to_string();
    hub.send(
        &session,
        key,
        &run,
        vec![ContentBlock::Text(TextContent::new(text))],
        Some(QueueMode::FollowUp),
    )?;
    if let Some(waiter) = hub.wait_for(&run) {
        let _ = waiter.await;
    }
    match hub.outcome(&run).flatten() {
        Some((Outcome::Ok { .. }, _, _)) => Ok(()),
        Some((Outcome::Error { message, .. }, _, _)) => Err(ErrorShape::invalid(message)),
        _ => Err(ErrorShape::invalid(cancelled)),
    }
}

/// `chat.startup`'s `sessionInfo`: the session's row and its runs.
fn session_info(hub: &Hub, key: &str, session: Option<&str>) -> chat::SessionInfo {
    let runs = session.map(|s| hub.unfinished(s)).unwrap_or_default();
    chat::SessionInfo {
        session: match hub.row_of(key) {
            Some(row) => chat::StartupSession::Listed(Box::new(row)),
            None => chat::StartupSession::New {
                key: key.to_string(),
                kind: "direct",
            },
        },
        agent_id: "main",
        has_active_run: !runs.is_empty(),
        active_run_ids: runs,
    }
}

/// How the last `/compact` of a transcript ended.
#[derive(Debug, PartialEq)]
enum Compaction {
    Done {
        tokens_before: u64,
    },
    /// Nothing was old enough to summarise.
    NotNeeded(String),
    Failed(String),
}

/// Reads how the last `/compact` recorded in the transcript at `path`
/// ended: the compaction record or the failure notice that follows it.
fn compaction_of(path: &std::path::Path) -> Compaction {
    use crate::session::transcript::Record;
    let entries = match crate::session::transcript::load(path) {
        Ok(transcript) => transcript.entries,
        Err(e) => return Compaction::Failed(e.to_string()),
    };
    let start = entries.iter().rposition(|e| {
        matches!(&e.record, Record::Command { text } if text == "/compact" || text.starts_with("/compact "))
    });
    let after = start.map_or(&entries[..0], |i| &entries[i + 1..]);
    let nothing = crate::agent::compaction::CompactError::NothingToCompact.to_string();
    for entry in after {
        match &entry.record {
            Record::Compaction { tokens_before, .. } => {
                return Compaction::Done {
                    tokens_before: *tokens_before,
                };
            }
            Record::Notice { text } => {
                if let Some(reason) = text.strip_prefix(crate::acp::COMPACTION_FAILED) {
                    let reason = reason.trim().to_string();
                    return if reason == nothing {
                        Compaction::NotNeeded(reason)
                    } else {
                        Compaction::Failed(reason)
                    };
                }
            }
            _ => {}
        }
    }
    Compaction::Failed("the session recorded no compaction".to_string())
}

/// Reads files (transcripts, settings) for an answer on the blocking
/// pool, so that the streams a runtime worker serves do not wait for it.
async fn reading<T: Send + 'static>(
    hub: &Arc<Hub>,
    work: impl FnOnce(&Hub) -> Result<T, ErrorShape> + Send + 'static,
) -> Result<T, ErrorShape> {
    let hub = hub.clone();
    crate::parallel::ANSWERS
        .run(move || work(&hub))
        .await
        .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("reading for the answer failed: {e}")))?
}

/// Runs `work` (reading a transcript, which may be large) for the session
/// `key` names on the blocking pool, so that the streams a runtime worker
/// serves do not wait for it.
async fn off_runtime<T: Send + 'static>(
    hub: &Arc<Hub>,
    key: &str,
    work: impl FnOnce(&Hub, &str) -> Result<T, ErrorShape> + Send + 'static,
) -> Result<T, ErrorShape> {
    let (hub, key) = (hub.clone(), key.to_string());
    crate::parallel::ANSWERS
        .run(move || work(&hub, &key))
        .await
        .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("reading the session failed: {e}")))?
}

/// The turn a request names: `turn` (as `/rewind` numbers them) or the
/// `messageId` of the user message that started it (as `chat.history`
/// gives it).
fn turn_param(
    hub: &Hub,
    key: &str,
    turn: Option<u64>,
    message: Option<&str>,
) -> Result<Option<usize>, ErrorShape> {
    if let Some(turn) = turn {
        return usize::try_from(turn)
            .ok()
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or_else(|| ErrorShape::invalid("`turn` must be a turn number from 1"));
    }
    let Some(message) = message else {
        return Ok(None);
    };
    let session = hub.lookup(key).ok_or_else(|| not_found(key))?;
    let path = crate::session::find(hub.data_dir(), &session).ok_or_else(|| not_found(key))?;
    let loaded = crate::session::transcript::load(&path)
        .map_err(|e| ErrorShape::invalid(format!("cannot read the session: {e}")))?;
    let turns = crate::session::restore(loaded.entries).turns;
    turns
        .iter()
        .position(|t| t.prompt_id == message)
        .map(|i| Some(i + 1))
        .ok_or_else(|| {
            ErrorShape::invalid(format!(
                "`messageId` {message} is not a user message that started a turn"
            ))
        })
}

/// What `sessions.list` asks the other replicas of a team gateway for:
/// the same sessions, from the first up to the end of the page asked for
/// (the pages are cut once the rows are merged).
fn rows_asked(query: &sessions::ListParams) -> hub::RowsAsked {
    let limit = query.limit.map_or(100, |n| n.min(1000) as usize);
    let offset = usize::try_from(query.offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let archived = match query.archived.as_ref() {
        Some(Value::Bool(true)) => "only",
        Some(Value::String(s)) if s == "all" => "include",
        Some(Value::String(s)) if s == "only" => "only",
        _ => "exclude",
    };
    hub::RowsAsked {
        search: query.search.as_deref().map(str::to_lowercase),
        archived: archived.to_string(),
        limit: offset.saturating_add(limit).min(1000),
        active_minutes: query.active_minutes.filter(|m| *m > 0),
        last_message: query.include_last_message == Some(true),
        spawned_by: query.spawned_by.clone(),
        no_helpers: query.exclude_subagents == Some(true),
        busy_only: query.active_only == Some(true),
    }
}

fn list(
    hub: &Hub,
    query: sessions::ListParams,
    elsewhere: Vec<hub::RowsElsewhere>,
) -> Result<sessions::Listed, ErrorShape> {
    only_main(query.agent_id.as_deref())?;
    let limit = query.limit.map_or(100, |n| n.min(1000) as usize);
    let offset = usize::try_from(query.offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let search = query.search.as_deref().map(str::to_lowercase);
    // OpenClaw's `archived`: "all" or "only"; without it, the sessions
    // not archived.
    let archived = match query.archived.as_ref().unwrap_or(&Value::Null) {
        Value::Null => Archived::Exclude,
        Value::Bool(false) => Archived::Exclude,
        Value::Bool(true) => Archived::Only,
        Value::String(s) if s == "exclude" => Archived::Exclude,
        Value::String(s) if s == "all" => Archived::Include,
        Value::String(s) if s == "only" => Archived::Only,
        other => {
            return Err(ErrorShape::invalid(format!(
                "`archived` is {other}; it takes \"all\", \"only\" or \"exclude\""
            )));
        }
    };
    let active_minutes = match query.active_minutes {
        Some(0) => {
            return Err(ErrorShape::invalid(
                "`activeMinutes` must be a positive integer",
            ));
        }
        minutes => minutes,
    };
    // Alone, the page is cut here; in a cluster, once this replica's rows
    // are merged with the others'.
    let alone = elsewhere.is_empty();
    let (here_offset, here_limit) = if alone {
        (offset, limit)
    } else {
        (0, offset.saturating_add(limit).min(1000))
    };
    // No pincer session has a dashboard board.
    let (page, count) = if query.has_board == Some(true) {
        (Vec::new(), 0)
    } else {
        hub.session_rows_with(&hub::RowQuery {
            search: search.as_deref(),
            archived,
            offset: here_offset,
            limit: here_limit,
            active_minutes,
            last_message: query.include_last_message == Some(true),
            spawned_by: query.spawned_by.as_deref(),
            no_helpers: query.exclude_subagents == Some(true),
            busy_only: query.active_only == Some(true),
        })
    };
    let mut page: Vec<sessions::ListedRow> = page
        .into_iter()
        .map(|row| sessions::ListedRow::Here(Box::new(row)))
        .collect();
    let mut count = count;
    if !alone && query.has_board != Some(true) {
        for there in elsewhere {
            count += there.count;
            page.extend(there.rows.into_iter().map(sessions::ListedRow::Elsewhere));
        }
        // Newest first; a session two replicas list (one took it over
        // from the other) once, as the one that changed it last has it.
        page.sort_by_key(|row| {
            let (key, time) = row.key_and_time();
            (std::cmp::Reverse(time), key)
        });
        let mut seen = std::collections::HashSet::new();
        let before = page.len();
        page.retain(|row| seen.insert(row.key_and_time().0));
        count = count.saturating_sub(before - page.len());
        page = page.into_iter().skip(offset).take(limit).collect();
    }
    let more = offset.saturating_add(limit) < count;
    if query.include_activity_summary == Some(true) {
        for row in &mut page {
            match row {
                sessions::ListedRow::Here(row) => {
                    row.activity_summary = Some(sessions::ActivitySummary::UNAVAILABLE);
                }
                sessions::ListedRow::Elsewhere(row) => {
                    row["activitySummary"] =
                        serde_json::to_value(sessions::ActivitySummary::UNAVAILABLE)
                            .unwrap_or_default();
                }
            }
        }
    }
    let people = query.include_people == Some(true);
    Ok(sessions::Listed {
        defaults: hub.row_defaults(),
        sessions: page,
        has_more: more,
        count,
        ts: now_ms(),
        next_offset: more.then_some(offset + limit),
        people: people.then(Vec::new),
        people_incomplete: people.then_some(false),
        people_session_count: people.then_some(0),
    })
}

fn resolve(hub: &Hub, query: sessions::ResolveParams) -> Result<sessions::Resolved, ErrorShape> {
    only_main(query.agent_id.as_deref())?;
    // OpenClaw's Control UI names a session by `reference: {key, slug}`
    // (the slug is only how its address shows the key) or by the short
    // id in its address (here, a prefix of the session's id).
    let reference = query.reference.as_ref().and_then(|r| r.key.as_deref());
    let wanted = query
        .key
        .as_deref()
        .or(query.session_id.as_deref())
        .or(query.label.as_deref())
        .or(reference)
        .or(query.short_id.as_deref())
        .ok_or_else(|| {
            ErrorShape::invalid("give `key`, `sessionId`, `label`, `reference.key` or `shortId`")
        })?;
    let sessions = crate::session::list(hub.data_dir(), None);
    let found = hub.lookup(wanted).or_else(|| {
        sessions
            .iter()
            .find(|s| s.title.as_deref() == Some(wanted) || s.id.starts_with(wanted))
            .map(|s| s.id.clone())
    });
    match found {
        Some(session) => Ok(sessions::Resolved {
            ok: true,
            key: Some(hub.key_of(&session)),
            agent_id: Some("main"),
            session_id: Some(session),
        }),
        None if query.allow_missing == Some(true) => Ok(sessions::Resolved {
            ok: false,
            key: None,
            agent_id: None,
            session_id: None,
        }),
        None => Err(ErrorShape::invalid(format!("no session matches {wanted}"))),
    }
}

/// The longest session label, in characters.
const MAX_LABEL: usize = 200;

/// A session's `label` (`sessions.patch`, `sessions.create`): the user's
/// name for the session, one line of 1 to [`MAX_LABEL`] characters
/// (surrounding spaces dropped).
fn checked_label(label: Option<&str>) -> Result<Option<&str>, ErrorShape> {
    let Some(label) = label else {
        return Ok(None);
    };
    let label = label.trim();
    if label.is_empty() {
        return Err(ErrorShape::invalid(
            "`label` is empty: give the session a name of 1 to 200 characters",
        ));
    }
    if label.chars().count() > MAX_LABEL {
        return Err(ErrorShape::invalid(format!(
            "`label` has {} characters: a session name has at most {MAX_LABEL}",
            label.chars().count()
        )));
    }
    if label.chars().any(char::is_control) {
        return Err(ErrorShape::invalid(
            "`label` holds a control character (a line break, a tab, …): a session name is one line of text",
        ));
    }
    Ok(Some(label))
}

/// Refuses an `agentId` other than the gateway's one agent, `main`.
fn only_main(agent: Option<&str>) -> Result<(), ErrorShape> {
    match agent {
        Some(agent) if agent != "main" => Err(ErrorShape::invalid(format!(
            "unknown agent `{agent}`: this gateway has one agent, `main`"
        ))),
        _ => Ok(()),
    }
}

/// A session key from typed params, checked as every key is.
fn checked_key<'a>(name: &str, key: &'a str) -> Result<&'a str, ErrorShape> {
    hub::check_key(name, key)?;
    Ok(key)
}

/// OpenClaw's clients name the session they mean (`expectedSessionId`):
/// a key that names another one by now is not acted on.
fn expected_session(hub: &Hub, key: &str, expected: Option<&str>) -> Result<(), ErrorShape> {
    match expected {
        Some(expected) if hub.lookup(key).as_deref() != Some(expected) => Err(ErrorShape::invalid(
            format!("{key} no longer names session {expected}"),
        )),
        _ => Ok(()),
    }
}

/// `sessions.create`: the session `key` names (a new key, `web:<uuid>`,
/// when none is given), created, or adopted when the key names one
/// already; with its label when one is given.
async fn create(hub: &Arc<Hub>, conn: &Arc<Conn>, query: sessions::CreateParams) -> Reply {
    only_main(query.agent_id.as_deref())?;
    if let Some(parent) = &query.parent_session_key {
        checked_key("parentSessionKey", parent)?;
    }
    // Checked before the session is made, so that a bad label makes none.
    let label = checked_label(query.label.as_deref())?;
    let key = match &query.key {
        Some(key) => checked_key("key", key)?.to_string(),
        None => format!("web:{}", uuid::Uuid::new_v4()),
    };
    let session = hub.open(&key).await?;
    hub.follow(conn, &session);
    let patch = Patch {
        label,
        ..Patch::default()
    };
    let (_, entry) = hub.patch(&key, patch).await?;
    answer(&sessions::Changed {
        ok: true,
        key: key.to_string(),
        session_id: session,
        entry: Some(entry),
    })
}

/// `sessions.patch`'s `permissionMode`: pincer's mode ids, OpenClaw's
/// names for the same modes (`read-only`, `guarded`, `full`; see
/// [`crate::agent::Mode::openclaw`]), or `null`, OpenClaw's "default": the
/// mode new sessions start in.
fn permission_mode(
    hub: &Hub,
    given: Option<Option<&str>>,
) -> Result<Option<crate::agent::Mode>, ErrorShape> {
    use crate::agent::Mode;
    match given {
        None => Ok(None),
        Some(None) => Ok(Some(hub.default_mode())),
        Some(Some(name)) => Mode::parse(name)
            .or_else(|| Mode::from_openclaw(name))
            .map(Some)
            .ok_or_else(|| {
                ErrorShape::invalid(if name == "workspace" {
                    "permissionMode `workspace` (an AI reviewer decides) is not supported by pincer: a person answers its approvals; choose `guarded` or `read-only`".to_string()
                } else {
                    let ids: Vec<&str> = Mode::ALL.iter().map(|m| m.id()).collect();
                    let names: Vec<&str> = Mode::ALL.iter().filter_map(|m| m.openclaw()).collect();
                    format!(
                        "unknown permissionMode `{name}`: pincer's modes are {} (OpenClaw's names {}, or null for the default)",
                        ids.join(", "),
                        names.join(", ")
                    )
                })
            }),
    }
}

async fn patch(hub: &Arc<Hub>, conn: &Conn, query: sessions::PatchParams) -> Reply {
    only_main(query.agent_id.as_deref())?;
    let key = checked_key("key", &query.key)?;
    let elsewhere = hub.elsewhere(key).await;
    // OpenClaw's CLI names the session it means: a key that names another
    // one by now is not changed.
    match (&elsewhere, query.expected_session_id.as_deref()) {
        (Some(elsewhere), Some(expected)) if elsewhere.session != expected => {
            return Err(ErrorShape::invalid(format!(
                "{key} no longer names session {expected}"
            )));
        }
        (Some(_), _) => {}
        (None, expected) => expected_session(hub, key, expected)?,
    }
    // Everything is checked before anything changes.
    let label = checked_label(query.label.as_deref())?;
    let mode = permission_mode(hub, query.permission_mode.as_ref().map(Option::as_deref))?;
    if let Some(Some(runtime)) = &query.agent_runtime {
        return Err(ErrorShape::invalid(format!(
            "sessions.patch: agentRuntime `{runtime}` is not supported by pincer, which runs every model in its own agent loop (send null for it)"
        )));
    }
    let model = match query.model {
        None => None,
        Some(Some(model)) => Some(model),
        Some(None) => Some(hub.default_model().ok_or_else(|| {
            ErrorShape::invalid("model: no default model is configured to go back to")
        })?),
    };
    // `bypass` runs every tool without asking: turning it on answers every
    // approval to come, so it takes the scope that answers approvals.
    if mode == Some(crate::agent::Mode::Bypass) {
        need(conn, Need::Approvals)?;
    }
    // A session another replica runs is changed there, as checked here.
    if let Some(elsewhere) = elsewhere {
        let asked = hub::PatchAsked {
            label: label.map(str::to_string),
            model,
            thinking: query.thinking_level.clone(),
            permission_mode: mode.map(|m| m.id().to_string()),
            queue_mode: query.queue_mode.clone(),
            verbose: query.verbose_level.clone(),
            archived: query.archived,
            expected: query.expected_session_id.clone(),
        };
        let (session, entry) = hub.patch_elsewhere(&elsewhere, asked).await?;
        return answer(&json!({
            "ok": true,
            "key": key,
            "sessionId": session,
            "entry": entry,
        }));
    }
    if let Some(archived) = query.archived {
        let session = hub
            .lookup(key)
            .ok_or_else(|| ErrorShape::invalid(format!("no session is named {key}")))?;
        hub.set_archived(&session, archived);
    }
    let patch = Patch {
        label,
        model: model.as_deref(),
        thinking: query.thinking_level.as_deref(),
        permission_mode: mode.map(crate::agent::Mode::id),
        queue_mode: query.queue_mode.as_deref(),
        verbose: query.verbose_level.as_deref(),
    };
    let (session, entry) = hub.patch(key, patch).await?;
    answer(&sessions::Changed {
        ok: true,
        key: key.to_string(),
        session_id: session,
        entry: Some(entry),
    })
}
