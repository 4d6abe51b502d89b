//! `cron.*`: OpenClaw's job records, pages and run entries, which pincer
//! fills from its `[[cron]]` jobs (see `scheduler::records`).
//!
//! pincer's jobs are its config's: all enabled, each a cron expression in
//! a zone that sends a prompt to its session (`sessionTarget
//! "session:<key>"`) and, with a `target`, announces the reply there.

use serde::{Deserialize, Serialize};

/// A job as `cron.list`, `cron.get` and the `cron` event carry it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: String,
    pub name: String,
    pub agent_id: &'static str,
    pub session_key: String,
    pub enabled: bool,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Changes when the job's definition does (never its state).
    pub config_revision: String,
    pub schedule: Schedule,
    pub session_target: String,
    pub wake_mode: &'static str,
    pub payload: Payload,
    pub delivery: Delivery,
    pub state: State,
    // The read view's top-level copies of `state`.
    pub next_run_at_ms: Option<i64>,
    pub last_run_at_ms: Option<i64>,
    pub last_run_status: Option<RunStatus>,
    pub last_run_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivered: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery_status: Option<DeliveryStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_suppression_reason: Option<String>,
    pub effective_agent_id: &'static str,
}

/// When a job runs: pincer's are cron expressions.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Schedule {
    Cron { expr: String, tz: String },
}

/// What a run does: pincer's send the job's prompt as a turn.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Payload {
    AgentTurn { message: String },
}

/// Where the reply goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum Delivery {
    None,
    Announce { channel: String, to: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RunStatus {
    Ok,
    Error,
    Skipped,
}

impl RunStatus {
    pub fn wire(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Skipped => "skipped",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryStatus {
    Delivered,
    NotDelivered,
    NotRequested,
}

/// A job's runs so far, from `cron.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
    /// Set while a run goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run_status: Option<RunStatus>,
    /// Why the last run failed or was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivered: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery_status: Option<DeliveryStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery_error: Option<String>,
    /// Why the last reply was not sent: it was silent (`NO_REPLY`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_suppression_reason: Option<String>,
    /// When the last run ended (or the last time one was due).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status_at_ms: Option<i64>,
}

/// What a recorded status line says in OpenClaw's terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recorded {
    pub status: Option<RunStatus>,
    /// Why the run failed or was skipped.
    pub error: Option<String>,
    /// Whether its reply was delivered, and why not.
    pub delivery: Option<(DeliveryStatus, Option<String>)>,
}

/// What a recorded status line (`scheduler::Entry::last_status`) says in
/// OpenClaw's terms: the run's status, its error, and its delivery.
pub fn parse_status(text: &str) -> Recorded {
    let ok = |delivery| Recorded {
        status: Some(RunStatus::Ok),
        error: None,
        delivery: Some(delivery),
    };
    let failed = |status, why: &str| Recorded {
        status: Some(status),
        error: Some(why.to_string()),
        delivery: None,
    };
    if text == "ok" || text == SILENT {
        return ok((DeliveryStatus::NotRequested, None));
    }
    if text.starts_with("delivered to ") {
        return ok((DeliveryStatus::Delivered, None));
    }
    if let Some(why) = text.strip_prefix("not delivered: ") {
        return ok((DeliveryStatus::NotDelivered, Some(why.to_string())));
    }
    if let Some(why) = text.strip_prefix("failed: ") {
        return failed(RunStatus::Error, why);
    }
    if let Some(why) = text.strip_prefix("skipped: ") {
        return failed(RunStatus::Skipped, why);
    }
    Recorded::default()
}

/// `cron.list { compact: true }`'s row (the Control UI's inbox).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactJob {
    pub id: String,
    pub name: String,
    pub agent_id: &'static str,
    pub updated_at_ms: i64,
    pub enabled: bool,
    pub next_run_at: Option<String>,
    pub next_run_at_ms: Option<i64>,
    pub schedule_kind: &'static str,
    pub schedule: Schedule,
    pub last_run_at: Option<String>,
    pub last_run_at_ms: Option<i64>,
    pub last_run_status: Option<RunStatus>,
    pub last_run_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_at_ms: Option<i64>,
    pub effective_agent_id: &'static str,
}

impl From<&Job> for CompactJob {
    fn from(job: &Job) -> Self {
        let iso = |ms: Option<i64>| {
            ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        };
        Self {
            id: job.id.clone(),
            name: job.name.clone(),
            agent_id: job.agent_id,
            updated_at_ms: job.updated_at_ms,
            enabled: job.enabled,
            next_run_at: iso(job.next_run_at_ms),
            next_run_at_ms: job.next_run_at_ms,
            schedule_kind: "cron",
            schedule: job.schedule.clone(),
            last_run_at: iso(job.last_run_at_ms),
            last_run_at_ms: job.last_run_at_ms,
            last_run_status: job.last_run_status,
            last_run_error: job.last_run_error.clone(),
            running_at_ms: job.state.running_at_ms,
            effective_agent_id: job.effective_agent_id,
        }
    }
}

/// `cron.list`'s params (OpenClaw's `CronListParamsSchema`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    pub session_key: Option<String>,
    pub session_agent_id: Option<String>,
    pub include_disabled: Option<bool>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    pub query: Option<String>,
    pub enabled: Option<EnabledFilter>,
    pub schedule_kind: Option<ScheduleKindFilter>,
    pub last_run_status: Option<LastRunFilter>,
    pub trigger: Option<TriggerFilter>,
    pub sort_by: Option<SortBy>,
    pub sort_dir: Option<SortDir>,
    pub agent_id: Option<String>,
    pub compact: Option<bool>,
    pub include_delivery_previews: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EnabledFilter {
    All,
    Enabled,
    Disabled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScheduleKindFilter {
    All,
    At,
    Every,
    Cron,
    OnExit,
    Stream,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LastRunFilter {
    All,
    Ok,
    Error,
    Skipped,
    Unknown,
}

impl LastRunFilter {
    /// Whether a run (or a job's last run) of `status` passes.
    fn keeps(self, status: Option<RunStatus>) -> bool {
        match self {
            Self::All => true,
            Self::Unknown => status.is_none(),
            Self::Ok => status == Some(RunStatus::Ok),
            Self::Error => status == Some(RunStatus::Error),
            Self::Skipped => status == Some(RunStatus::Skipped),
        }
    }
}

/// Whether `query` (none or blank: everything) is in one of `texts`,
/// ignoring case.
fn found<'a>(query: Option<&str>, texts: impl IntoIterator<Item = &'a str>) -> bool {
    let query = query.map(str::trim).unwrap_or_default().to_lowercase();
    query.is_empty()
        || texts
            .into_iter()
            .any(|text| text.to_lowercase().contains(&query))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TriggerFilter {
    All,
    Conditional,
    Unconditional,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum SortBy {
    #[serde(rename = "nextRunAtMs")]
    NextRun,
    #[serde(rename = "updatedAtMs")]
    Updated,
    #[serde(rename = "name")]
    Name,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SortDir {
    Asc,
    Desc,
}

/// One page of `cron.list`: `offset + jobs.len() == total` unless
/// `hasMore`, and `snapshotRevision` names the whole filtered list, so a
/// client paging through sees a change between pages.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub jobs: Vec<T>,
    pub snapshot_revision: String,
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub has_more: bool,
    pub next_offset: Option<usize>,
    /// pincer's own page (not the compact list) also shows the heartbeat,
    /// as `pincer cron list --json` does, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<serde_json::Value>,
    /// … and the jobs that do not run, with why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<Vec<Invalid>>,
}

impl<T> Page<T> {
    /// The same page with its jobs in another shape.
    pub fn map<U>(self, shape: impl FnOnce(Vec<T>) -> Vec<U>) -> Page<U> {
        Page {
            jobs: shape(self.jobs),
            snapshot_revision: self.snapshot_revision,
            total: self.total,
            offset: self.offset,
            limit: self.limit,
            has_more: self.has_more,
            next_offset: self.next_offset,
            heartbeat: self.heartbeat,
            invalid: self.invalid,
        }
    }
}

/// A `[[cron]]` job whose config is wrong, so that it never runs.
#[derive(Clone, Debug, Serialize)]
pub struct Invalid {
    pub name: String,
    pub error: String,
}

/// The page of `items` at `offset` (clamped to the list) of at most
/// `limit` (1–200; none: the whole list, 50 for an empty one).
pub fn page<T: Clone>(
    items: &[T],
    offset: Option<u64>,
    limit: Option<u64>,
) -> (usize, usize, Vec<T>) {
    let total = items.len();
    let offset = (offset.unwrap_or(0) as usize).min(total);
    let default = if total == 0 { 50 } else { total };
    let limit = (limit.map(|l| l as usize).unwrap_or(default)).clamp(1, 200);
    let page = items.iter().skip(offset).take(limit).cloned().collect();
    (offset, limit, page)
}

impl ListParams {
    /// Whether `job` is one the filters keep (pincer's jobs are all
    /// enabled, all cron expressions, all unconditional, all `main`'s).
    pub fn keeps(&self, job: &Job) -> bool {
        let enabled = match self.enabled {
            Some(EnabledFilter::Disabled) => false,
            Some(_) | None => true,
        };
        let kind = matches!(
            self.schedule_kind,
            None | Some(ScheduleKindFilter::All | ScheduleKindFilter::Cron)
        );
        let trigger = !matches!(self.trigger, Some(TriggerFilter::Conditional));
        let agent = [&self.agent_id, &self.session_agent_id]
            .into_iter()
            .flatten()
            .all(|agent| agent == job.agent_id);
        let session = self
            .session_key
            .as_deref()
            .is_none_or(|key| key.strip_prefix("agent:main:").unwrap_or(key) == job.session_key);
        let status = self
            .last_run_status
            .is_none_or(|filter| filter.keeps(job.state.last_run_status));
        let found = found(
            self.query.as_deref(),
            [job.id.as_str(), job.name.as_str(), job.agent_id],
        );
        enabled && kind && trigger && agent && session && status && found
    }

    /// Sorts as OpenClaw does: by next run (jobs without one last, either
    /// way), last update or name, ties by id.
    pub fn sort(&self, jobs: &mut [Job]) {
        let desc = self.sort_dir == Some(SortDir::Desc);
        jobs.sort_by(|a, b| {
            let order = match self.sort_by.unwrap_or(SortBy::NextRun) {
                SortBy::NextRun => match (a.state.next_run_at_ms, b.state.next_run_at_ms) {
                    (Some(x), Some(y)) if desc => y.cmp(&x),
                    (Some(x), Some(y)) => x.cmp(&y),
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => std::cmp::Ordering::Equal,
                },
                SortBy::Updated if desc => b.updated_at_ms.cmp(&a.updated_at_ms),
                SortBy::Updated => a.updated_at_ms.cmp(&b.updated_at_ms),
                SortBy::Name if desc => b.name.to_lowercase().cmp(&a.name.to_lowercase()),
                SortBy::Name => a.name.to_lowercase().cmp(&b.name.to_lowercase()),
            };
            order.then_with(|| a.id.cmp(&b.id))
        });
    }
}

/// `cron.get`'s and the other one-job methods' params.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobParams {
    pub id: String,
}

pub use super::NoParams;

/// `cron.status`'s answer.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Whether this gateway runs its jobs.
    pub enabled: bool,
    pub triggers_enabled: bool,
    /// `cron.json`: each job's last run.
    pub store_path: String,
    pub jobs: usize,
    pub next_wake_at_ms: Option<i64>,
}

/// `cron.runs`'s params (OpenClaw's `CronRunsParamsSchema`). Delivery
/// filters are refused: pincer records whether a reply was delivered,
/// not OpenClaw's finer delivery statuses.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunsParams {
    pub agent_id: Option<String>,
    pub scope: Option<RunsScope>,
    pub id: Option<String>,
    pub job_id: Option<String>,
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    pub statuses: Option<Vec<RunStatusFilter>>,
    pub status: Option<LastRunFilter>,
    pub query: Option<String>,
    pub sort_dir: Option<SortDir>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RunsScope {
    Job,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RunStatusFilter {
    Ok,
    Error,
    Skipped,
}

impl RunStatusFilter {
    fn status(self) -> RunStatus {
        match self {
            Self::Ok => RunStatus::Ok,
            Self::Error => RunStatus::Error,
            Self::Skipped => RunStatus::Skipped,
        }
    }
}

/// What a silent reply's record says.
pub const SILENT: &str = "silent";

/// A finished run, as `cron.runs` lists it. pincer keeps each job's last
/// run, so that is what it lists.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEntry {
    pub ts: i64,
    pub job_id: String,
    pub job_name: String,
    pub action: &'static str,
    pub status: RunStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_status: Option<DeliveryStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_suppression_reason: Option<String>,
    pub session_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
}

impl RunEntry {
    /// The job's last run, once one has an outcome.
    pub fn last_of(job: &Job) -> Option<Self> {
        let state = &job.state;
        let status = state.last_run_status?;
        Some(Self {
            ts: state.last_status_at_ms.or(state.last_run_at_ms)?,
            job_id: job.id.clone(),
            job_name: job.name.clone(),
            action: "finished",
            status,
            error: state.last_error.clone(),
            delivered: state.last_delivered,
            delivery_status: state.last_delivery_status,
            delivery_error: state.last_delivery_error.clone(),
            delivery_suppression_reason: state.delivery_suppression_reason.clone(),
            session_key: job.session_key.clone(),
            run_at_ms: state.last_run_at_ms,
            duration_ms: state.last_duration_ms,
            next_run_at_ms: state.next_run_at_ms,
        })
    }
}

impl RunsParams {
    pub fn keeps(&self, entry: &RunEntry) -> bool {
        let job = match self.scope {
            Some(RunsScope::Job) => self
                .id
                .as_ref()
                .or(self.job_id.as_ref())
                .is_some_and(|id| *id == entry.job_id),
            _ => self
                .id
                .as_ref()
                .or(self.job_id.as_ref())
                .is_none_or(|id| *id == entry.job_id),
        };
        let agent = self.agent_id.as_deref().is_none_or(|a| a == "main");
        let statuses = self
            .statuses
            .as_ref()
            .is_none_or(|s| s.iter().any(|s| s.status() == entry.status));
        let status = self
            .status
            .is_none_or(|filter| filter.keeps(Some(entry.status)));
        let found = found(
            self.query.as_deref(),
            [entry.job_id.as_str(), entry.job_name.as_str()]
                .into_iter()
                .chain(entry.error.as_deref()),
        );
        job && agent && statuses && status && found
    }
}

/// One page of `cron.runs`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunsPage {
    pub entries: Vec<RunEntry>,
    pub total: usize,
    pub offset: usize,
    pub limit: usize,
    pub has_more: bool,
    pub next_offset: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_status_reads_as_openclaw_s_run_and_delivery_status() {
        let delivered = parse_status("delivered to telegram:dm:1");
        assert_eq!(delivered.status, Some(RunStatus::Ok));
        assert_eq!(delivered.delivery, Some((DeliveryStatus::Delivered, None)));
        let failed = parse_status("failed: the model refused");
        assert_eq!(failed.status, Some(RunStatus::Error));
        assert_eq!(failed.error.as_deref(), Some("the model refused"));
        assert_eq!(
            parse_status("skipped: the session was busy").status,
            Some(RunStatus::Skipped)
        );
        assert_eq!(
            parse_status("not delivered: no such chat").delivery,
            Some((DeliveryStatus::NotDelivered, Some("no such chat".into())))
        );
        assert_eq!(parse_status("running"), Recorded::default());
    }

    #[test]
    fn a_page_is_clamped_to_the_list_and_to_200() {
        let items: Vec<u32> = (0..300).collect();
        let (offset, limit, rows) = page(&items, Some(290), Some(50));
        assert_eq!((offset, limit, rows.len()), (290, 50, 10));
        let (_, limit, rows) = page(&items, None, None);
        assert_eq!((limit, rows.len()), (200, 200));
        let (offset, limit, rows) = page(&[] as &[u32], Some(5), None);
        assert_eq!((offset, limit, rows.len()), (0, 50, 0));
    }

    #[test]
    fn list_params_are_closed_and_name_what_they_refuse() {
        let error = serde_json::from_value::<ListParams>(serde_json::json!({"nope": 1}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `nope`"), "{error}");
        let error = serde_json::from_value::<ListParams>(serde_json::json!({"sortBy": "size"}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown variant `size`"), "{error}");
    }
}
