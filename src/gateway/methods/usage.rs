//! The usage methods on the wire: `sessions.usage`,
//! `sessions.usage.timeseries`, `sessions.usage.logs`, `usage.cost` and
//! `usage.status`. The transcripts are read off the runtime's threads.

use std::sync::Arc;

use serde_json::Value;

use super::{Reply, only_main, typed};
use crate::gateway::channels::Chat;
use crate::gateway::frames::{ErrorShape, UNAVAILABLE, answer, now_ms};
use crate::gateway::hub::Hub;
use crate::gateway::protocol::usage::{
    AgentScope, CacheStatus, CostParams, CostSummary, Creator, Dated, DetailParams, ProviderStatus,
    SessionLogs, SessionRow, SessionsParams, SessionsUsage, Totals, UNKNOWN_CREATOR,
};
use crate::gateway::usage::{self, Accumulator};

/// The one agent's id, refusing any other.
fn agent(
    method: &str,
    agent_id: Option<&str>,
    scope: Option<AgentScope>,
) -> Result<(), ErrorShape> {
    if scope == Some(AgentScope::All) && agent_id.is_some() {
        return Err(ErrorShape::invalid(format!(
            "{method}: agentScope=all cannot be combined with agentId"
        )));
    }
    only_main(agent_id)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, ErrorShape> {
    crate::parallel::ANSWERS
        .run(work)
        .await
        .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("usage read failed: {e}")))?
        .map_err(ErrorShape::invalid)
}

pub(super) async fn sessions(hub: &Arc<Hub>, params: Value) -> Reply {
    let query: SessionsParams = typed("sessions.usage", params)?;
    if query.agent_scope == Some(AgentScope::All)
        && (query.key.is_some() || query.agent_id.is_some())
    {
        return Err(ErrorShape::invalid(
            "sessions.usage: agentScope=all cannot be combined with key or agentId",
        ));
    }
    agent("sessions.usage", query.agent_id.as_deref(), None)?;
    if let Some(key) = &query.key {
        crate::gateway::hub::check_key("key", key)?;
    }
    if query.limit == Some(0) {
        return Err(ErrorShape::invalid(
            "sessions.usage: `limit` must be 1 or more",
        ));
    }
    let window = query
        .dates()
        .window(jiff::Timestamp::now())
        .map_err(ErrorShape::invalid)?;
    let listed = hub.usage_sessions(window.start_ms, query.key.as_deref());
    let limit = query.limit.unwrap_or(50) as usize;
    let with_weight = query.include_context_weight == Some(true);
    // A creator other than the one pincer files every session under
    // matches none.
    let creator_matches = query
        .creator_key
        .as_deref()
        .is_none_or(|key| key == UNKNOWN_CREATOR);
    let usage = blocking(move || {
        let mut accumulator = Accumulator::default();
        let mut rows = Vec::new();
        let sessions = if creator_matches { listed } else { Vec::new() };
        let files = sessions.len();
        for session in sessions {
            // A transcript that cannot be read counts nothing; its row
            // says so with no usage.
            let used = usage::session(&session.path, &session.id, &window).ok();
            // A chat channel's conversation counts for its channel.
            let channel = Chat::channel_of(&session.key).map(str::to_string);
            accumulator.add(used.as_ref(), "main", channel.as_deref());
            if rows.len() < limit {
                rows.push(SessionRow {
                    key: session.key,
                    label: session.label,
                    session_id: session.id,
                    scope: "instance",
                    updated_at: session.updated_at,
                    agent_id: "main",
                    creator_key: UNKNOWN_CREATOR,
                    channel,
                    model_provider: session.provider,
                    model: session.model,
                    usage: used,
                    has_context_weight: false,
                    context_weight: with_weight.then_some(Value::Null),
                });
            }
        }
        let now = now_ms() as i64;
        let (totals, aggregates) = accumulator.finish();
        Ok(SessionsUsage {
            updated_at: now,
            start_date: window.day(window.start_ms),
            end_date: window.day(window.end_ms),
            sessions: rows,
            totals,
            aggregates,
            creator_options: vec![Creator {
                key: UNKNOWN_CREATOR,
            }],
            cache_status: CacheStatus::fresh(files, now),
        })
    })
    .await?;
    answer(&usage)
}

pub(super) async fn cost(hub: &Arc<Hub>, params: Value) -> Reply {
    let query: CostParams = typed("usage.cost", params)?;
    agent("usage.cost", query.agent_id.as_deref(), query.agent_scope)?;
    let window = query
        .dates()
        .window(jiff::Timestamp::now())
        .map_err(ErrorShape::invalid)?;
    let sessions = hub.usage_sessions(window.start_ms, None);
    let cost = blocking(move || {
        let mut totals = Totals::default();
        let mut daily: std::collections::BTreeMap<String, Totals> = Default::default();
        let files = sessions.len();
        for session in sessions {
            let Ok(used) = usage::session(&session.path, &session.id, &window) else {
                continue;
            };
            totals.add(&used.totals);
            for day in &used.daily_breakdown {
                daily.entry(day.date.clone()).or_default().add(&day.totals);
            }
        }
        let now = now_ms() as i64;
        Ok(CostSummary {
            updated_at: now,
            days: window.days(),
            daily: daily
                .into_iter()
                .map(|(date, value)| Dated { date, value })
                .collect(),
            totals,
            cache_status: CacheStatus::fresh(files, now),
        })
    })
    .await?;
    answer(&cost)
}

/// `sessions.usage.timeseries` (`logs` false) or `sessions.usage.logs`.
pub(super) async fn detail(hub: &Arc<Hub>, method: &str, params: Value, logs: bool) -> Reply {
    let query: DetailParams = typed(method, params)?;
    if !logs && query.limit.is_some() {
        return Err(ErrorShape::invalid(format!(
            "{method}: `limit` is not supported by pincer (it takes `key`, `agentId`)"
        )));
    }
    agent(method, query.agent_id.as_deref(), None)?;
    let detail = if logs { "logs" } else { "timeseries" };
    let key = query
        .key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ErrorShape::invalid(format!("key is required for {detail}")))?
        .to_string();
    crate::gateway::hub::check_key("key", &key)?;
    let Some(session) = hub.usage_sessions(0, Some(&key)).into_iter().next() else {
        return Err(ErrorShape::invalid(format!(
            "No transcript found for session: {key}"
        )));
    };
    let limit = match query.limit {
        Some(n) if n.is_finite() && n <= 0.0 => 0,
        Some(n) if n.is_finite() => n.min(1000.0) as usize,
        _ => 200,
    };
    if logs {
        let logs = blocking(move || usage::logs(&session.path, limit)).await?;
        answer(&SessionLogs { logs })
    } else {
        answer(&blocking(move || usage::timeseries(&session.path, &session.id)).await?)
    }
}

/// `usage.status`: pincer reads no provider's quota windows.
pub(super) fn status(params: Value) -> Reply {
    let _: crate::gateway::protocol::cron::NoParams = typed("usage.status", params)?;
    answer(&ProviderStatus {
        updated_at: now_ms() as i64,
        providers: Vec::new(),
    })
}
