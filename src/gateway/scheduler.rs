//! The gateway's own runs: the `[heartbeat]` and the `[[cron]]` jobs of the
//! user's config, started by `pincer gateway` beside the channels.
//!
//! A run is a message to the job's session through the hub's typed API
//! (`Hub::submit`, what `chat.send` does) as an in-process client, like a
//! channel, so queue modes, approvals and the transcript behave as for
//! any client. Its final text goes to the job's
//! target chat unless it is silent (`NO_REPLY`, `HEARTBEAT_OK`). When each
//! job last ran is kept in the data dir (`cron.json`, readable by the user
//! only), so that a run missed while the gateway was down is caught up
//! once or skipped, as the job says, and `pincer cron list` can show it
//! without a gateway. The decisions are `gateway::schedule`'s; time comes
//! from a [`Clock`] so that tests drive the loop by hand.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::protocol::cron;
use super::schedule::{ActiveHours, Missed, Schedule, due, is_silent, next_heartbeat};
use crate::config::channels::{CronJob, HeartbeatConfig, MissedRuns};

/// The longest a sleep of the loop lasts: a wall clock that jumps (a
/// laptop waking up, a time sync) is noticed within this.
const MAX_SLEEP: Duration = Duration::from_secs(30);

/// Where the time comes from.
pub trait Clock: Send + Sync + 'static {
    /// Now, in the local time zone.
    fn now(&self) -> Zoned;
    /// Resolves at `when` or later (it may resolve earlier: the loop looks
    /// at the time again).
    fn sleep_until(&self, when: Timestamp) -> BoxFuture<'static, ()>;
}

/// The system's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Zoned {
        Zoned::now()
    }

    fn sleep_until(&self, when: Timestamp) -> BoxFuture<'static, ()> {
        let wait = when.duration_since(Timestamp::now());
        let wait = Duration::try_from(wait)
            .unwrap_or(Duration::ZERO)
            .saturating_add(Duration::from_millis(1))
            .min(MAX_SLEEP);
        Box::pin(tokio::time::sleep(wait))
    }
}

/// What a run needs of the gateway.
pub trait Runs: Send + Sync + 'static {
    /// Whether the session `key` names has a run going.
    fn busy(&self, key: &str) -> bool;
    /// Sends `prompt` to `key` as run `id` and returns the run's final
    /// text, or why it failed.
    /// `sandbox` is the job's `[sandbox]`: nobody watches the run.
    fn run(
        &self,
        key: String,
        prompt: String,
        id: String,
        sandbox: crate::tools::sandbox::SandboxConfig,
    ) -> BoxFuture<'static, Result<String, String>>;
    /// Sends `text` to the chat `target` names.
    fn deliver(&self, target: &str, text: &str) -> Result<(), String>;
    /// A job's run started or finished (its record is saved): clients
    /// that show the jobs hear it.
    fn changed(&self, _job: &str, _action: &'static str) {}
}

/// A `[[cron]]` job, checked.
#[derive(Clone, Debug)]
pub struct Job {
    pub name: String,
    pub expression: String,
    schedule: Schedule,
    pub zone: TimeZone,
    /// The zone's name as configured, or the system's.
    pub zone_name: String,
    pub prompt: String,
    pub target: Option<String>,
    pub session: String,
    pub missed: Missed,
    /// The job's `[sandbox]` (its sessions are unattended).
    pub sandbox: crate::tools::sandbox::SandboxConfig,
}

/// The `[heartbeat]`, checked and on.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    pub every: Duration,
    pub active: Option<ActiveHours>,
    pub active_text: Option<String>,
    pub target: Option<String>,
    pub session: String,
    /// The workspace's HEARTBEAT.md: each run's prompt.
    pub file: PathBuf,
    /// The heartbeat's `[sandbox]` (its session is unattended).
    pub sandbox: crate::tools::sandbox::SandboxConfig,
}

/// A job of the config that does not run, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Invalid {
    pub name: String,
    pub error: String,
}

/// What the config asks the scheduler to do.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub jobs: Vec<Job>,
    pub invalid: Vec<Invalid>,
    pub heartbeat: Option<Heartbeat>,
    /// Why the configured heartbeat does not run (an invalid setting).
    pub heartbeat_error: Option<String>,
    /// `cron.json` in the data dir.
    pub state_file: PathBuf,
}

impl super::hub::Scheduled for Plan {
    fn listed(&self) -> (Vec<cron::Job>, Value) {
        let record = Record::load(&self.state_file).unwrap_or_default();
        let now = Zoned::now();
        (records(self, &record, &now), listing(self, &record, &now))
    }

    fn records(&self) -> Vec<cron::Job> {
        let record = Record::load(&self.state_file).unwrap_or_default();
        records(self, &record, &Zoned::now())
    }

    fn store_path(&self) -> &Path {
        &self.state_file
    }

    fn last_heartbeat(&self) -> Option<Value> {
        let heartbeat = self.heartbeat.as_ref()?;
        let record = Record::load(&self.state_file).ok()?;
        let entry = record.heartbeat?;
        heartbeat_event(
            entry.last_status.as_deref()?,
            entry.last_status_ms?,
            heartbeat.target.as_deref(),
        )
    }
}

/// A heartbeat run's recorded status as OpenClaw's heartbeat event
/// (`{ts, status: sent | ok-token | skipped | failed, reason?, channel?,
/// to?}`); `None` for a run still going.
pub fn heartbeat_event(status: &str, ts: i64, target: Option<&str>) -> Option<Value> {
    let channel = target.and_then(|t| t.split(':').next());
    let (status, reason) = match status {
        "running" => return None,
        // Nothing to say (`HEARTBEAT_OK`, `NO_REPLY` or no text).
        "silent" => ("ok-token", None),
        // A reply with nowhere to go: it stays in the session.
        "ok" => ("skipped", Some("target-none")),
        other => match other.split_once(": ") {
            Some(("skipped", why)) => ("skipped", Some(why)),
            Some(("failed" | "not delivered", why)) => ("failed", Some(why)),
            _ if other.starts_with("delivered to ") => ("sent", None),
            _ => ("failed", Some(other)),
        },
    };
    let mut event = json!({"ts": ts, "status": status});
    if let Some(reason) = reason {
        event["reason"] = json!(reason);
    }
    if reason == Some("target-none") {
        event["message"] = json!("The heartbeat has no `target`: its reply stays in its session.");
    } else if let (Some(channel), Some(target)) = (channel, target) {
        event["channel"] = json!(channel);
        event["to"] = json!(target);
    }
    Some(event)
}

/// `cron.json`: when the runs happened.
pub fn state_file(data_dir: &Path) -> PathBuf {
    data_dir.join("cron.json")
}

impl Plan {
    /// Checks the user's `[[cron]]` and `[heartbeat]`; a job that cannot
    /// run is listed in `invalid` with a sentence naming it, the others
    /// run.
    pub fn new(
        jobs: &[CronJob],
        heartbeat: Option<&HeartbeatConfig>,
        config_dir: &Path,
        data_dir: &Path,
    ) -> Self {
        let mut plan = Plan {
            state_file: state_file(data_dir),
            ..Default::default()
        };
        let mut names = HashSet::new();
        for (i, job) in jobs.iter().enumerate() {
            let name = job.name.trim().to_string();
            let label = if name.is_empty() {
                format!("#{}", i + 1)
            } else {
                name.clone()
            };
            match check_job(job, &name, &mut names) {
                Ok(job) => plan.jobs.push(job),
                Err(why) => plan.invalid.push(Invalid {
                    name: label.clone(),
                    error: format!("[[cron]] job `{label}`: {why}; it will not run"),
                }),
            }
        }
        if let Some(config) = heartbeat {
            match check_heartbeat(config, config_dir) {
                Ok(heartbeat) => plan.heartbeat = heartbeat,
                Err(why) => {
                    plan.heartbeat_error = Some(format!("[heartbeat]: {why}; it will not run"))
                }
            }
        }
        plan
    }

    /// Sentences for the person who started the gateway: what will not
    /// run.
    pub fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self.invalid.iter().map(|i| i.error.clone()).collect();
        problems.extend(self.heartbeat_error.clone());
        problems
    }
}

fn check_job(job: &CronJob, name: &str, names: &mut HashSet<String>) -> Result<Job, String> {
    if name.is_empty() {
        return Err("it has no `name`".to_string());
    }
    if !names.insert(name.to_string()) {
        return Err("another job has this name; give each job its own".to_string());
    }
    let schedule: Schedule = job.schedule.parse()?;
    let (zone, zone_name) = match job.timezone.as_deref().map(str::trim) {
        Some(name) if !name.is_empty() => {
            let zone = TimeZone::get(name).map_err(|_| {
                format!("the time zone \"{name}\" is unknown; use an IANA name such as \"Europe/Berlin\" or \"UTC\"")
            })?;
            (zone, name.to_string())
        }
        _ => {
            let zone = TimeZone::system();
            let name = zone.iana_name().unwrap_or("local").to_string();
            (zone, name)
        }
    };
    if job.prompt.trim().is_empty() {
        return Err("its `prompt` is empty".to_string());
    }
    let session = job
        .session
        .clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("cron:{name}"));
    Ok(Job {
        name: name.to_string(),
        expression: job.schedule.trim().to_string(),
        schedule,
        zone,
        zone_name,
        prompt: job.prompt.clone(),
        target: job.target.clone().filter(|t| !t.trim().is_empty()),
        session,
        missed: match job.missed {
            MissedRuns::Skip => Missed::Skip,
            MissedRuns::RunOnce => Missed::RunOnce,
        },
        sandbox: job.sandbox.clone(),
    })
}

fn check_heartbeat(
    config: &HeartbeatConfig,
    config_dir: &Path,
) -> Result<Option<Heartbeat>, String> {
    let minutes = config.every_minutes();
    if minutes == 0 {
        return Ok(None);
    }
    let active = config
        .active_hours
        .as_deref()
        .map(str::parse::<ActiveHours>)
        .transpose()?;
    Ok(Some(Heartbeat {
        every: Duration::from_secs(minutes.saturating_mul(60)),
        active,
        active_text: config.active_hours.clone(),
        target: config.target.clone().filter(|t| !t.trim().is_empty()),
        session: config
            .session
            .clone()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "heartbeat".to_string()),
        file: crate::config::workspace_dir(config_dir).join("HEARTBEAT.md"),
        sandbox: config.sandbox.clone(),
    }))
}

/// The prompt of a heartbeat: HEARTBEAT.md, unless it is missing or holds
/// no task (only blank lines, headings and empty list items: OpenClaw
/// skips those runs too, to spend no model call on nothing).
pub fn heartbeat_prompt(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let empty = text
        .lines()
        .map(str::trim)
        .all(|line| line.is_empty() || is_heading(line) || is_empty_item(line));
    (!empty).then_some(text)
}

fn is_heading(line: &str) -> bool {
    let rest = line.trim_start_matches('#');
    rest.len() < line.len() && (rest.is_empty() || rest.starts_with(char::is_whitespace))
}

fn is_empty_item(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(['-', '*', '+']) else {
        return false;
    };
    let rest = rest.trim();
    rest.is_empty() || matches!(rest, "[]" | "[ ]" | "[x]" | "[X]")
}

// ----- what happened -----

/// One job's (or the heartbeat's) record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Entry {
    /// When the scheduler first knew the job: runs before it were never
    /// due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run_ms: Option<i64>,
    /// How the last run (or the last time one was due) went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status_ms: Option<i64>,
}

/// Saves `record` (whose lock the caller holds) to `file`; a failure is
/// logged, and the next save writes the whole record again.
fn save_record(record: &Record, file: &Path) {
    if let Err(e) = record.save(file) {
        tracing::warn!("scheduled runs: {e}");
    }
}

/// `cron.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Record {
    pub jobs: BTreeMap<String, Entry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<Entry>,
}

impl Record {
    /// The record in `file`; none yet is an empty one. A file that cannot
    /// be read is an error naming it (a record thrown away would repeat or
    /// lose runs).
    pub fn load(file: &Path) -> Result<Self, String> {
        match std::fs::read_to_string(file) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{} is not a record of scheduled runs ({e}); move it away to start over",
                    file.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(format!("cannot read {}: {e}", file.display())),
        }
    }

    /// Writes it whole (a crash leaves the old one or the new one),
    /// readable by the user only.
    pub fn save(&self, file: &Path) -> Result<(), String> {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        crate::config::trust::write_private(file, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))
    }

    fn entry(&mut self, job: Option<&str>) -> &mut Entry {
        match job {
            Some(name) => self.jobs.entry(name.to_string()).or_default(),
            None => self.heartbeat.get_or_insert_with(Entry::default),
        }
    }

    /// A job's entry (`None`: the heartbeat's).
    pub fn get(&self, job: Option<&str>) -> Option<&Entry> {
        match job {
            Some(name) => self.jobs.get(name),
            None => self.heartbeat.as_ref(),
        }
    }
}

fn zoned(ms: i64, zone: &TimeZone) -> Option<Zoned> {
    Timestamp::from_millisecond(ms)
        .ok()
        .map(|t| t.to_zoned(zone.clone()))
}

// ----- the list -----

/// What `pincer cron list` and `cron.list` show: each job and the
/// heartbeat, with their next and last runs as of `now`.
pub fn listing(plan: &Plan, record: &Record, now: &Zoned) -> Value {
    let time = |z: Option<Zoned>| {
        z.map(|z| json!({"atMs": z.timestamp().as_millisecond(), "text": display(&z)}))
            .unwrap_or(Value::Null)
    };
    let mut jobs = Vec::new();
    for job in &plan.jobs {
        let entry = record.jobs.get(&job.name).cloned().unwrap_or_default();
        let now = now.with_time_zone(job.zone.clone());
        let next = due(&job.schedule, job.missed, None, &now).next;
        let last = entry.last_run_ms.and_then(|ms| zoned(ms, &job.zone));
        jobs.push(json!({
            "name": job.name,
            "schedule": job.expression,
            "timezone": job.zone_name,
            "nextRun": time(next),
            "lastRun": time(last),
            "lastStatus": entry.last_status,
            "target": job.target,
            "sessionKey": job.session,
            "missed": match job.missed { Missed::Skip => "skip", Missed::RunOnce => "run_once" },
            "error": Value::Null,
        }));
    }
    for invalid in &plan.invalid {
        jobs.push(json!({
            "name": invalid.name,
            "error": invalid.error,
        }));
    }
    let heartbeat = match (&plan.heartbeat, &plan.heartbeat_error) {
        (Some(hb), _) => {
            let entry = record.heartbeat.clone().unwrap_or_default();
            let last = entry.last_run_ms.and_then(|ms| zoned(ms, now.time_zone()));
            let next = next_heartbeat(hb.every, hb.active, last.as_ref(), now);
            json!({
                "everyMinutes": hb.every.as_secs() / 60,
                "activeHours": hb.active_text,
                "nextRun": time(next),
                "lastRun": time(last),
                "lastStatus": entry.last_status,
                "target": hb.target,
                "sessionKey": hb.session,
                "prompt": hb.file,
                "promptEmpty": heartbeat_prompt(&hb.file).is_none(),
                "error": Value::Null,
            })
        }
        (None, Some(error)) => json!({"error": error}),
        (None, None) => Value::Null,
    };
    json!({"jobs": jobs, "heartbeat": heartbeat})
}

/// The jobs as OpenClaw's records (`cron.list`, `cron.get`), as of
/// `now`: each with its schedule, prompt, delivery and last run.
pub fn records(plan: &Plan, record: &Record, now: &Zoned) -> Vec<cron::Job> {
    plan.jobs
        .iter()
        .map(|job| {
            let entry = record.jobs.get(&job.name).cloned().unwrap_or_default();
            let next = due(
                &job.schedule,
                job.missed,
                None,
                &now.with_time_zone(job.zone.clone()),
            )
            .next
            .map(|z| z.timestamp().as_millisecond());
            let text = entry.last_status.as_deref().unwrap_or_default();
            let cron::Recorded {
                status,
                error,
                delivery,
            } = cron::parse_status(text);
            let running = text == "running";
            let state = cron::State {
                next_run_at_ms: next,
                running_at_ms: if running { entry.last_run_ms } else { None },
                last_run_at_ms: entry.last_run_ms,
                last_run_status: status,
                last_error: error,
                last_duration_ms: match (status, entry.last_run_ms, entry.last_status_ms) {
                    (Some(cron::RunStatus::Ok | cron::RunStatus::Error), Some(run), Some(end)) => {
                        Some((end - run).max(0))
                    }
                    _ => None,
                },
                last_delivered: delivery
                    .as_ref()
                    .filter(|(s, _)| *s != cron::DeliveryStatus::NotRequested)
                    .map(|(s, _)| *s == cron::DeliveryStatus::Delivered),
                last_delivery_status: delivery.as_ref().map(|(s, _)| *s),
                last_delivery_error: delivery.and_then(|(_, e)| e),
                delivery_suppression_reason: (text == cron::SILENT)
                    .then(|| cron::SILENT.to_string()),
                last_status_at_ms: if status.is_some() {
                    entry.last_status_ms
                } else {
                    None
                },
            };
            let delivery = match &job.target {
                Some(target) => {
                    let (channel, to) = target.split_once(':').unwrap_or((target, ""));
                    cron::Delivery::Announce {
                        channel: channel.to_string(),
                        to: to.to_string(),
                    }
                }
                None => cron::Delivery::None,
            };
            let definition = serde_json::to_vec(&json!([
                job.name,
                job.expression,
                job.zone_name,
                job.prompt,
                job.target,
                job.session,
                matches!(job.missed, Missed::RunOnce),
            ]))
            .unwrap_or_default();
            let since = entry.since_ms.unwrap_or_default();
            cron::Job {
                id: job.name.clone(),
                name: job.name.clone(),
                agent_id: "main",
                session_key: job.session.clone(),
                enabled: true,
                created_at_ms: since,
                updated_at_ms: since,
                config_revision: revision(&definition),
                schedule: cron::Schedule::Cron {
                    expr: job.expression.clone(),
                    tz: job.zone_name.clone(),
                },
                session_target: format!("session:{}", job.session),
                wake_mode: "now",
                payload: cron::Payload::AgentTurn {
                    message: job.prompt.clone(),
                },
                delivery,
                next_run_at_ms: state.next_run_at_ms,
                last_run_at_ms: state.last_run_at_ms,
                last_run_status: state.last_run_status,
                last_run_error: state.last_error.clone(),
                last_delivered: state.last_delivered,
                last_delivery_status: state.last_delivery_status,
                last_delivery_error: state.last_delivery_error.clone(),
                delivery_suppression_reason: state.delivery_suppression_reason.clone(),
                state,
                effective_agent_id: "main",
            }
        })
        .collect()
}

/// `sha256:<base64url>` of `bytes`: OpenClaw's form of a revision.
pub fn revision(bytes: &[u8]) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    format!(
        "sha256:{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
    )
}

/// A time as people read it, in its zone.
pub fn display(time: &Zoned) -> String {
    time.strftime("%Y-%m-%d %H:%M:%S %Z").to_string()
}

// ----- the loop -----

/// The name a scheduled run is claimed under in a cluster: `cron:<job>`,
/// or `heartbeat`.
fn claim_name(job: Option<&str>) -> String {
    match job {
        Some(name) => format!("cron:{name}"),
        None => "heartbeat".to_string(),
    }
}

/// The interval of `every` on the clock's grid (counted from the epoch)
/// that `time` falls in, as its start.
fn interval_of(time: &Zoned, every: std::time::Duration) -> Zoned {
    let every = i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1);
    let ms = time.timestamp().as_millisecond();
    let start = ms - ms.rem_euclid(every);
    Timestamp::from_millisecond(start)
        .map(|t| t.to_zoned(time.time_zone().clone()))
        .unwrap_or_else(|_| time.clone())
}

/// The scheduler of one gateway.
pub struct Scheduler {
    plan: Arc<Plan>,
    clock: Arc<dyn Clock>,
    runs: Arc<dyn Runs>,
    record: Arc<Mutex<Record>>,
    /// Jobs with a run going (`None`: the heartbeat): the next one waits.
    running: Arc<Mutex<HashSet<Option<String>>>>,
    /// The time of the last pass over the jobs, for tests to wait on.
    passes: tokio::sync::watch::Sender<Option<Timestamp>>,
    /// Who runs what in a cluster (alone: this gateway, always).
    claims: Arc<dyn crate::cluster::Claims>,
}

impl Scheduler {
    pub fn new(plan: Arc<Plan>, clock: Arc<dyn Clock>, runs: Arc<dyn Runs>) -> Self {
        let record = Record::load(&plan.state_file).unwrap_or_else(|e| {
            // Kept for the user to look at, not overwritten.
            let aside = plan.state_file.with_extension("json.broken");
            let _ = std::fs::rename(&plan.state_file, &aside);
            crate::gateway::eprintln_log(&format!(
                "scheduled runs: {e}; moved it to {} and started a new record",
                aside.display()
            ));
            Record::default()
        });
        Self {
            plan,
            clock,
            runs,
            record: Arc::new(Mutex::new(record)),
            running: Arc::default(),
            passes: tokio::sync::watch::channel(None).0,
            claims: Arc::new(crate::cluster::Alone),
        }
    }

    /// In a cluster: each run is claimed first, and runs only on the
    /// replica whose claim the store took.
    pub fn with_claims(mut self, claims: Arc<dyn crate::cluster::Claims>) -> Self {
        self.claims = claims;
        self
    }

    /// Whether run `slot` of `job` (`None`: the heartbeat) is this
    /// gateway's to do. When the store cannot say, nobody runs it: a run
    /// skipped is better than a run done twice.
    async fn claimed(&self, job: Option<&str>, slot: &Zoned) -> bool {
        let label = match job {
            Some(name) => format!("cron job `{name}`"),
            None => "the heartbeat".to_string(),
        };
        match self
            .claims
            .claim(&claim_name(job), slot.timestamp().as_millisecond())
            .await
        {
            Ok(true) => true,
            Ok(false) => {
                tracing::info!("{label}: the run of {} is another replica's", display(slot));
                false
            }
            Err(e) => {
                crate::gateway::eprintln_log(&format!(
                    "{label}: the run of {} is skipped: {e}",
                    display(slot)
                ));
                let mut record = self.record();
                let entry = record.entry(job);
                entry.last_status =
                    Some("skipped: the cluster's store could not be reached".into());
                entry.last_status_ms = Some(self.clock.now().timestamp().as_millisecond());
                drop(record);
                self.save();
                false
            }
        }
    }

    /// The latest run of `job` (`None`: the heartbeat) any replica of the
    /// cluster claimed.
    async fn cluster_last(&self, job: Option<&str>) -> Option<i64> {
        self.claims
            .last(&claim_name(job))
            .await
            .unwrap_or_else(|e| {
                tracing::warn!("the cluster's last runs are unknown: {e}");
                None
            })
    }

    /// A receiver of the time of each pass the loop finished.
    pub fn passes(&self) -> tokio::sync::watch::Receiver<Option<Timestamp>> {
        self.passes.subscribe()
    }

    fn record(&self) -> parking_lot::MutexGuard<'_, Record> {
        self.record.lock()
    }

    /// Writes the record as it stands. The lock is held while writing, so
    /// that of two saves at once the later state is the one left on disk
    /// (`cron.list` reads the file): a run that ended while the scheduler
    /// saved must not be shown running for good.
    fn save(&self) {
        save_record(&self.record(), &self.plan.state_file);
    }

    /// Runs until the task is dropped: first what was missed, then each
    /// job at its time.
    pub async fn run(self) {
        let now = self.clock.now();
        let mut next: Vec<Option<Zoned>> = Vec::new();
        let jobs = self.plan.jobs.clone();
        for job in &jobs {
            let cluster_last = self.cluster_last(Some(&job.name)).await;
            let (upcoming, catch_up) = self.start_job(job, &now, cluster_last);
            if let Some(slot) = catch_up
                && self.claimed(Some(&job.name), &slot).await
            {
                self.launch(job, &now);
            }
            next.push(upcoming);
        }
        let beat_last = match &self.plan.heartbeat {
            Some(_) => self.cluster_last(None).await,
            None => None,
        };
        let mut next_beat = self.plan.heartbeat.as_ref().and_then(|hb| {
            let local = self.record().heartbeat.as_ref().and_then(|e| e.last_run_ms);
            let last = local
                .max(beat_last)
                .and_then(|ms| zoned(ms, now.time_zone()));
            next_heartbeat(hb.every, hb.active, last.as_ref(), &now)
        });
        self.save();
        let _ = self.passes.send(Some(now.timestamp()));
        loop {
            let wake = next
                .iter()
                .chain(std::iter::once(&next_beat))
                .flatten()
                .map(Zoned::timestamp)
                .min();
            match wake {
                Some(wake) => self.clock.sleep_until(wake).await,
                None => return,
            }
            let now = self.clock.now();
            for (job, next) in jobs.iter().zip(next.iter_mut()) {
                if let Some(slot) = next.clone().filter(|n| n.timestamp() <= now.timestamp()) {
                    if self.claimed(Some(&job.name), &slot).await {
                        self.launch(job, &now);
                    }
                    let now = now.with_time_zone(job.zone.clone());
                    *next = due(&job.schedule, Missed::Skip, None, &now).next;
                }
            }
            if let Some(hb) = &self.plan.heartbeat
                && let Some(slot) = next_beat
                    .clone()
                    .filter(|n| n.timestamp() <= now.timestamp())
            {
                // In a cluster the replicas' heartbeats drift apart (each
                // counts from its own start): one beat per interval of the
                // clock's grid is claimed, whoever is first. Another
                // replica's beat counts as the last.
                let last = if self.claimed(None, &interval_of(&slot, hb.every)).await {
                    self.beat(hb, &now);
                    now.clone()
                } else {
                    slot
                };
                next_beat = next_heartbeat(hb.every, hb.active, Some(&last), &now);
            }
            let _ = self.passes.send(Some(now.timestamp()));
        }
    }

    /// A job at the scheduler's start: catches up or skips what it missed,
    /// and returns its next run.
    /// In a cluster, the run the missed runs' catch-up is claimed as is
    /// the last time on the schedule, so that the replicas starting at
    /// once agree on it and a run another replica did is not done again.
    fn start_job(
        &self,
        job: &Job,
        now: &Zoned,
        cluster_last: Option<i64>,
    ) -> (Option<Zoned>, Option<Zoned>) {
        let now = now.with_time_zone(job.zone.clone());
        let last = {
            let mut record = self.record();
            let entry = record.entry(Some(&job.name));
            // A job seen for the first time missed nothing before now, nor
            // one whose missed runs were skipped before.
            let local = match (entry.last_run_ms, entry.since_ms) {
                (Some(last), Some(since)) => last.max(since),
                (Some(last), None) => last,
                (None, _) => *entry
                    .since_ms
                    .get_or_insert(now.timestamp().as_millisecond()),
            };
            // A run another replica of the cluster did counts too.
            cluster_last.map_or(local, |cluster| local.max(cluster))
        };
        let last = zoned(last, &job.zone);
        let plan = due(&job.schedule, job.missed, last.as_ref(), &now);
        let missed = due(&job.schedule, Missed::RunOnce, last.as_ref(), &now).now;
        let mut catch_up = None;
        if plan.now {
            crate::gateway::eprintln_log(&format!(
                "cron job `{}`: runs missed while the gateway was down; running it once now",
                job.name
            ));
            catch_up = Some(job.schedule.previous(&now).unwrap_or_else(|| now.clone()));
        } else if missed {
            crate::gateway::eprintln_log(&format!(
                "cron job `{}`: skipped the runs missed while the gateway was down",
                job.name
            ));
            let mut record = self.record();
            let entry = record.entry(Some(&job.name));
            entry.since_ms = Some(now.timestamp().as_millisecond());
            entry.last_status = Some("skipped: missed while the gateway was down".into());
            entry.last_status_ms = Some(now.timestamp().as_millisecond());
        }
        let line = match &plan.next {
            Some(next) => format!("cron job `{}`: next run {}", job.name, display(next)),
            None => format!(
                "cron job `{}`: its schedule has no time to come; it will not run",
                job.name
            ),
        };
        crate::gateway::eprintln_log(&line);
        (plan.next, catch_up)
    }

    fn launch(&self, job: &Job, now: &Zoned) {
        self.start(
            Some(job.name.clone()),
            job.session.clone(),
            job.prompt.clone(),
            job.target.clone(),
            now,
        );
    }

    /// A heartbeat that is due: runs unless outside the active hours,
    /// HEARTBEAT.md has nothing to do, or the session is busy.
    fn beat(&self, hb: &Heartbeat, now: &Zoned) {
        let skip = if hb.active.is_some_and(|a| !a.contains(now.time())) {
            Some("skipped: outside the active hours".to_string())
        } else if self.runs.busy(&hb.session) {
            Some("skipped: the session was busy".to_string())
        } else {
            None
        };
        let prompt = heartbeat_prompt(&hb.file);
        let skip = skip.or_else(|| {
            prompt
                .is_none()
                .then(|| format!("skipped: {} is missing or has no task", hb.file.display()))
        });
        match (skip, prompt) {
            (None, Some(prompt)) => {
                self.start(None, hb.session.clone(), prompt, hb.target.clone(), now)
            }
            (skip, _) => {
                let why = skip.unwrap_or_default();
                tracing::info!("heartbeat {why}");
                let mut record = self.record();
                let entry = record.entry(None);
                entry.last_status = Some(why);
                entry.last_status_ms = Some(now.timestamp().as_millisecond());
                drop(record);
                self.save();
            }
        }
    }

    /// Starts a run of `job` (`None`: the heartbeat) unless one is going,
    /// and records it and how it ended.
    fn start(
        &self,
        job: Option<String>,
        key: String,
        prompt: String,
        target: Option<String>,
        now: &Zoned,
    ) {
        let label = match &job {
            Some(name) => format!("cron job `{name}`"),
            None => "the heartbeat".to_string(),
        };
        let at = now.timestamp().as_millisecond();
        {
            let mut running = self.running.lock();
            if !running.insert(job.clone()) {
                drop(running);
                tracing::warn!("{label}: the last run has not ended; this one is skipped");
                let mut record = self.record();
                let entry = record.entry(job.as_deref());
                entry.last_status = Some("skipped: the last run had not ended".into());
                entry.last_status_ms = Some(at);
                drop(record);
                self.save();
                return;
            }
        }
        {
            let mut record = self.record();
            let entry = record.entry(job.as_deref());
            entry.last_run_ms = Some(at);
            entry.last_status = Some("running".into());
            entry.last_status_ms = Some(at);
        }
        self.save();
        if let Some(name) = &job {
            self.runs.changed(name, "started");
        }
        let id = format!(
            "{}:{}",
            job.as_deref()
                .map(|n| format!("cron:{n}"))
                .unwrap_or_else(|| "heartbeat".into()),
            uuid::Uuid::new_v4()
        );
        let sandbox = match &job {
            Some(name) => self
                .plan
                .jobs
                .iter()
                .find(|j| &j.name == name)
                .map(|j| j.sandbox.clone()),
            None => self.plan.heartbeat.as_ref().map(|hb| hb.sandbox.clone()),
        }
        .unwrap_or_default();
        let run = self.runs.run(key, prompt, id, sandbox);
        let runs = self.runs.clone();
        let record = self.record.clone();
        let running = self.running.clone();
        let file = self.plan.state_file.clone();
        let clock = self.clock.clone();
        tokio::spawn(async move {
            let status = match run.await {
                // The agent never streams a `NO_REPLY`: a silent run's
                // text is empty.
                Ok(text) if text.trim().is_empty() || is_silent(&text) => "silent".to_string(),
                Ok(text) => match &target {
                    None => "ok".to_string(),
                    Some(target) => match runs.deliver(target, &text) {
                        Ok(()) => format!("delivered to {target}"),
                        Err(e) => {
                            tracing::warn!("{label}: {e}");
                            format!("not delivered: {e}")
                        }
                    },
                },
                Err(e) => {
                    tracing::warn!("{label}: the run failed: {e}");
                    format!("failed: {e}")
                }
            };
            {
                let mut record = record.lock();
                let entry = record.entry(job.as_deref());
                entry.last_status = Some(status);
                entry.last_status_ms = Some(clock.now().timestamp().as_millisecond());
                save_record(&record, &file);
            }
            running.lock().remove(&job);
            if let Some(name) = &job {
                runs.changed(name, "finished");
            }
        });
    }

    /// The record as it stands (for tests).
    pub fn snapshot(&self) -> Record {
        self.record().clone()
    }

    /// Whether the job (`None`: the heartbeat) has a run going.
    pub fn is_running(&self, job: Option<&str>) -> bool {
        self.running.lock().contains(&job.map(str::to_string))
    }
}

// ----- the gateway's side -----

/// Runs through the hub, as an in-process client with the scopes to read
/// and send (never to answer approvals: nobody watches a scheduled run's
/// questions but the people at other clients).
struct HubRuns {
    hub: Arc<super::hub::Hub>,
    conn: Arc<super::conn::Conn>,
    channels: super::channels::runner::Channels,
}

impl Runs for HubRuns {
    fn busy(&self, key: &str) -> bool {
        self.hub
            .lookup(key)
            .is_some_and(|session| !self.hub.unfinished(&session).is_empty())
    }

    fn run(
        &self,
        key: String,
        prompt: String,
        id: String,
        sandbox: crate::tools::sandbox::SandboxConfig,
    ) -> BoxFuture<'static, Result<String, String>> {
        let hub = self.hub.clone();
        let conn = self.conn.clone();
        Box::pin(async move {
            use super::hub::Outcome;
            use agent_client_protocol::v1::schema::{ContentBlock, TextContent};
            let content = vec![ContentBlock::Text(TextContent::new(prompt))];
            hub.submit_unattended(&conn, &key, &id, content, &sandbox)
                .await
                .map_err(|e| e.message)?;
            let run = id;
            if let Some(ended) = hub.wait_for(&run) {
                let _ = ended.await;
            }
            match hub.outcome(&run).flatten() {
                Some((Outcome::Ok { .. }, text, _)) => Ok(text),
                Some((Outcome::Aborted, _, _)) => Err("the run was stopped".to_string()),
                Some((Outcome::Error { message, .. }, _, _)) => Err(message),
                None => Err("the run is gone".to_string()),
            }
        })
    }

    fn deliver(&self, target: &str, text: &str) -> Result<(), String> {
        self.channels.deliver(target, text)
    }

    fn changed(&self, job: &str, action: &'static str) {
        self.hub.announce_cron(job, action);
    }
}

/// Starts the scheduler of a gateway: says at once what will not run (an
/// invalid job, a target on a channel that is not running), then runs the
/// rest in a task of its own.
pub(crate) fn start(
    hub: &Arc<super::hub::Hub>,
    channels: super::channels::runner::Channels,
    plan: Arc<Plan>,
    claims: Arc<dyn crate::cluster::Claims>,
) {
    use super::conn::{Conn, Outbox, Scopes};
    for problem in plan.problems() {
        crate::gateway::eprintln_log(&problem);
    }
    let running = channels.names();
    let targets = plan
        .jobs
        .iter()
        .filter_map(|j| Some((format!("cron job `{}`", j.name), j.target.clone()?)))
        .chain(
            plan.heartbeat
                .iter()
                .filter_map(|h| Some(("the heartbeat".to_string(), h.target.clone()?))),
        );
    for (label, target) in targets {
        let channel = target.split(':').next().unwrap_or_default();
        if !running.contains(&channel) {
            crate::gateway::eprintln_log(&format!(
                "warning: {label} sends its replies to `{target}`, but no channel `{channel}` is running (configure [channels.{channel}]); it runs, and its replies stay in its session"
            ));
        }
    }
    if plan.jobs.is_empty() && plan.heartbeat.is_none() {
        return;
    }
    // Events of the sessions it sends to come to its outbox; nothing needs
    // them but the outbox must not fill.
    let (out, mut inbox) = Outbox::new(64 * 1024 * 1024);
    let conn = Arc::new(Conn {
        id: hub.next_conn_id(),
        out,
        scopes: Scopes {
            read: true,
            write: true,
            approvals: false,
            admin: false,
        },
        tool_events: false,
        scoped: true,
        // It reads no events: nothing to build for it.
        chat_deltas: true,
        sessions: Mutex::new(Default::default()),
        sessions_changed: Default::default(),
        presence: None,
    });
    hub.register(conn.clone());
    tokio::spawn(async move {
        while let Some(out) = inbox.rx.recv().await {
            inbox.written(&out);
        }
    });
    let runs = Arc::new(HubRuns {
        hub: hub.clone(),
        conn,
        channels,
    });
    let scheduler = Scheduler::new(plan, Arc::new(SystemClock), runs).with_claims(claims);
    tokio::spawn(scheduler.run());
}

#[cfg(test)]
mod tests;
