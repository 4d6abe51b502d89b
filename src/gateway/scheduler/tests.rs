//! The scheduler's loop driven by a hand-moved clock and fake runs: due
//! times, catch-up of missed runs, the heartbeat's skips, silent replies
//! and the listing.

use super::*;
use pretty_assertions::assert_eq;
use std::collections::VecDeque;

/// A clock the test moves.
struct ManualClock {
    now: Mutex<Zoned>,
    moved: tokio::sync::watch::Sender<Timestamp>,
}

impl ManualClock {
    fn new(now: &str) -> Arc<Self> {
        let now = at(now);
        Arc::new(Self {
            moved: tokio::sync::watch::channel(now.timestamp()).0,
            now: Mutex::new(now),
        })
    }

    fn set(&self, now: &str) {
        let now = at(now);
        *self.now.lock() = now.clone();
        self.moved.send_replace(now.timestamp());
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Zoned {
        self.now.lock().clone()
    }

    /// Resolves at `when`, or when the test moves the clock at all
    /// (so that each move makes one pass). The test runtime has one
    /// thread: the loop reads the time and comes here without the test
    /// running in between.
    fn sleep_until(&self, when: Timestamp) -> BoxFuture<'static, ()> {
        let mut moved = self.moved.subscribe();
        Box::pin(async move {
            if *moved.borrow_and_update() >= when {
                return;
            }
            let _ = moved.changed().await;
        })
    }
}

/// The gateway's side, recorded: each run's session and prompt, what
/// was delivered where; replies from a queue (none queued: a run that
/// does not end).
#[derive(Default)]
struct FakeRuns {
    calls: Mutex<Vec<(String, String)>>,
    /// The `[sandbox]` each run was given.
    sandboxes: Mutex<Vec<crate::tools::sandbox::SandboxConfig>>,
    replies: Mutex<VecDeque<Result<String, String>>>,
    delivered: Mutex<Vec<(String, String)>>,
    busy: Mutex<HashSet<String>>,
    channels: Vec<&'static str>,
}

impl Runs for FakeRuns {
    fn busy(&self, key: &str) -> bool {
        self.busy.lock().contains(key)
    }

    fn run(
        &self,
        key: String,
        prompt: String,
        _id: String,
        sandbox: crate::tools::sandbox::SandboxConfig,
    ) -> BoxFuture<'static, Result<String, String>> {
        self.calls.lock().push((key, prompt));
        self.sandboxes.lock().push(sandbox);
        match self.replies.lock().pop_front() {
            Some(reply) => Box::pin(async move { reply }),
            None => Box::pin(futures::future::pending()),
        }
    }

    fn deliver(&self, target: &str, text: &str) -> Result<(), String> {
        let channel = target.split(':').next().unwrap_or_default();
        if !self.channels.contains(&channel) {
            return Err(format!("no channel `{channel}` is running"));
        }
        self.delivered
            .lock()
            .push((target.to_string(), text.to_string()));
        Ok(())
    }
}

fn at(text: &str) -> Zoned {
    format!("{text}[UTC]").parse().unwrap()
}

fn ms(text: &str) -> i64 {
    at(text).timestamp().as_millisecond()
}

fn job(name: &str, schedule: &str, target: Option<&str>, missed: MissedRuns) -> CronJob {
    CronJob {
        name: name.into(),
        schedule: schedule.into(),
        prompt: format!("prompt of {name}"),
        target: target.map(String::from),
        session: None,
        missed,
        timezone: Some("UTC".into()),
        sandbox: Default::default(),
    }
}

struct Setup {
    clock: Arc<ManualClock>,
    runs: Arc<FakeRuns>,
    passes: tokio::sync::watch::Receiver<Option<Timestamp>>,
    state: PathBuf,
    _dir: tempfile::TempDir,
    workspace: PathBuf,
}

impl Setup {
    /// Starts a scheduler at `now` over `jobs` and `heartbeat`, with
    /// `record` as what an earlier gateway left, and `replies` queued.
    async fn start(
        now: &str,
        jobs: &[CronJob],
        heartbeat: Option<(HeartbeatConfig, Option<&str>)>,
        record: Option<Record>,
        replies: &[&str],
    ) -> Self {
        Self::replica(
            now,
            jobs,
            heartbeat,
            record,
            replies,
            Arc::new(crate::cluster::Alone),
        )
        .await
    }

    /// [`Setup::start`] for one replica of a cluster whose claims are
    /// `claims`.
    async fn replica(
        now: &str,
        jobs: &[CronJob],
        heartbeat: Option<(HeartbeatConfig, Option<&str>)>,
        record: Option<Record>,
        replies: &[&str],
        claims: Arc<dyn crate::cluster::Claims>,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = crate::config::workspace_dir(dir.path());
        std::fs::create_dir_all(&workspace).unwrap();
        if let Some((_, Some(text))) = &heartbeat {
            std::fs::write(workspace.join("HEARTBEAT.md"), text).unwrap();
        }
        let plan = Plan::new(
            jobs,
            heartbeat.as_ref().map(|h| &h.0),
            dir.path(),
            dir.path(),
        );
        assert_eq!(plan.problems(), Vec::<String>::new());
        if let Some(record) = record {
            record.save(&plan.state_file).unwrap();
        }
        let clock = ManualClock::new(now);
        let runs = Arc::new(FakeRuns {
            replies: Mutex::new(replies.iter().map(|r| Ok(r.to_string())).collect()),
            channels: vec!["telegram"],
            ..Default::default()
        });
        let state = plan.state_file.clone();
        let scheduler =
            Scheduler::new(Arc::new(plan), clock.clone(), runs.clone()).with_claims(claims);
        let mut passes = scheduler.passes();
        tokio::spawn(scheduler.run());
        let start = at(now).timestamp();
        passes.wait_for(|p| *p == Some(start)).await.unwrap();
        let setup = Self {
            clock,
            runs,
            passes,
            state,
            _dir: dir,
            workspace,
        };
        setup.settle().await;
        setup
    }

    /// Moves the clock and waits for the pass at that time.
    async fn move_to(&mut self, now: &str) {
        self.clock.set(now);
        let now = at(now).timestamp();
        self.passes
            .wait_for(|p| p.is_some_and(|p| p >= now))
            .await
            .unwrap();
        self.settle().await;
    }

    /// Lets the runs' tasks finish what they can (the test runtime has
    /// one thread: tasks that are ready run when the test yields).
    async fn settle(&self) {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    fn calls(&self) -> Vec<(String, String)> {
        self.runs.calls.lock().clone()
    }

    fn delivered(&self) -> Vec<(String, String)> {
        self.runs.delivered.lock().clone()
    }

    fn entry(&self, job: Option<&str>) -> Entry {
        let record = Record::load(&self.state).unwrap();
        record.get(job).cloned().unwrap_or_default()
    }
}

fn calls(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test]
async fn a_job_runs_at_its_times_and_its_reply_reaches_its_target() {
    let mut news = job(
        "news",
        "0 * * * * *",
        Some("telegram:dm:42"),
        MissedRuns::Skip,
    );
    // The job's own sandbox goes with each of its runs.
    news.sandbox.network = Some(crate::tools::sandbox::Network::On);
    let jobs = [news];
    let mut s = Setup::start(
        "2026-11-24T10:00:30",
        &jobs,
        None,
        None,
        &["Here is the news"],
    )
    .await;
    s.move_to("2026-11-24T10:00:59").await;
    assert_eq!(s.calls(), vec![]);
    s.move_to("2026-11-24T10:01:00").await;
    assert_eq!(s.calls(), calls(&[("cron:news", "prompt of news")]));
    assert_eq!(
        s.runs.sandboxes.lock()[0].network,
        Some(crate::tools::sandbox::Network::On)
    );
    assert_eq!(
        s.delivered(),
        calls(&[("telegram:dm:42", "Here is the news")])
    );
    assert_eq!(
        s.entry(Some("news")),
        Entry {
            since_ms: Some(ms("2026-11-24T10:00:30")),
            last_run_ms: Some(ms("2026-11-24T10:01:00")),
            last_status: Some("delivered to telegram:dm:42".into()),
            last_status_ms: Some(ms("2026-11-24T10:01:00")),
        }
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&s.state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[tokio::test]
async fn silent_replies_are_never_delivered() {
    let jobs = [
        job(
            "quiet",
            "0 * * * * *",
            Some("telegram:dm:42"),
            MissedRuns::Skip,
        ),
        job(
            "ack",
            "0 * * * * *",
            Some("telegram:dm:42"),
            MissedRuns::Skip,
        ),
    ];
    let mut s = Setup::start(
        "2026-11-24T10:00:30",
        &jobs,
        None,
        None,
        &["NO_REPLY", "All quiet. HEARTBEAT_OK"],
    )
    .await;
    s.move_to("2026-11-24T10:01:00").await;
    assert_eq!(s.calls().len(), 2);
    assert_eq!(s.delivered(), vec![]);
    assert_eq!(
        s.entry(Some("quiet")).last_status.as_deref(),
        Some("silent")
    );
    assert_eq!(s.entry(Some("ack")).last_status.as_deref(), Some("silent"));
    // What the gateway gives back for a `NO_REPLY`: nothing.
    s.runs
        .replies
        .lock()
        .extend([Ok(String::new()), Ok(" \n".into())]);
    s.move_to("2026-11-24T10:02:00").await;
    assert_eq!(s.calls().len(), 4);
    assert_eq!(s.delivered(), vec![]);
    assert_eq!(
        s.entry(Some("quiet")).last_status.as_deref(),
        Some("silent")
    );
    assert_eq!(s.entry(Some("ack")).last_status.as_deref(), Some("silent"));
}

#[tokio::test]
async fn a_target_on_a_channel_that_is_not_running_still_runs() {
    let jobs = [job(
        "lost",
        "0 * * * * *",
        Some("slack:dm:U1"),
        MissedRuns::Skip,
    )];
    let mut s = Setup::start("2026-11-24T10:00:30", &jobs, None, None, &["Report"]).await;
    s.move_to("2026-11-24T10:01:00").await;
    assert_eq!(s.calls(), calls(&[("cron:lost", "prompt of lost")]));
    assert_eq!(
        s.entry(Some("lost")).last_status.as_deref(),
        Some("not delivered: no channel `slack` is running")
    );
}

fn stale(name: &str) -> Record {
    let mut record = Record::default();
    record.jobs.insert(
        name.into(),
        Entry {
            since_ms: Some(ms("2026-11-01T00:00:00")),
            last_run_ms: Some(ms("2026-11-20T07:30:00")),
            ..Default::default()
        },
    );
    record
}

#[tokio::test]
async fn run_once_catches_up_one_missed_run_and_skip_does_not() {
    // Down from the 20th to the 24th: four daily runs missed.
    let jobs = [job("daily", "30 7 * * *", None, MissedRuns::RunOnce)];
    let mut s = Setup::start(
        "2026-11-24T12:00:00",
        &jobs,
        None,
        Some(stale("daily")),
        &["caught up"],
    )
    .await;
    assert_eq!(s.calls(), calls(&[("cron:daily", "prompt of daily")]));
    assert_eq!(
        s.entry(Some("daily")).last_run_ms,
        Some(ms("2026-11-24T12:00:00"))
    );
    assert_eq!(s.entry(Some("daily")).last_status.as_deref(), Some("ok"));
    // Nothing more until the next morning.
    s.move_to("2026-11-25T07:29:59").await;
    assert_eq!(s.calls().len(), 1);

    let jobs = [job("daily", "30 7 * * *", None, MissedRuns::Skip)];
    let mut s = Setup::start(
        "2026-11-24T12:00:00",
        &jobs,
        None,
        Some(stale("daily")),
        &[],
    )
    .await;
    s.move_to("2026-11-25T07:29:59").await;
    assert_eq!(s.calls(), vec![]);
    let entry = s.entry(Some("daily"));
    assert_eq!(entry.last_run_ms, Some(ms("2026-11-20T07:30:00")));
    assert_eq!(
        entry.last_status.as_deref(),
        Some("skipped: missed while the gateway was down")
    );
    // The skip is remembered: a gateway started later, even with
    // `run_once`, has nothing to catch up.
    let record = Record::load(&s.state).unwrap();
    let jobs = [job("daily", "30 7 * * *", None, MissedRuns::RunOnce)];
    let s = Setup::start("2026-11-24T13:00:00", &jobs, None, Some(record), &[]).await;
    assert_eq!(s.calls(), vec![]);
}

#[tokio::test]
async fn a_new_job_missed_nothing_and_a_run_still_going_is_not_doubled() {
    // No record: nothing was missed, whatever the schedule.
    let jobs = [job("slow", "0 * * * * *", None, MissedRuns::RunOnce)];
    let mut s = Setup::start("2026-11-24T10:00:30", &jobs, None, None, &[]).await;
    assert_eq!(s.calls(), vec![]);
    // The first run never ends (no reply queued): the next minute's
    // run is skipped, not stacked.
    s.move_to("2026-11-24T10:01:00").await;
    s.move_to("2026-11-24T10:02:00").await;
    assert_eq!(s.calls().len(), 1);
    assert_eq!(
        s.entry(Some("slow")).last_status.as_deref(),
        Some("skipped: the last run had not ended")
    );
}

fn heartbeat(every: u64, hours: Option<&str>) -> HeartbeatConfig {
    HeartbeatConfig {
        every_minutes: Some(every),
        active_hours: hours.map(String::from),
        target: Some("telegram:dm:7".into()),
        session: None,
        sandbox: Default::default(),
    }
}

#[tokio::test]
async fn the_heartbeat_runs_heartbeat_md_and_says_only_what_matters() {
    let task = "# Checks\n- Look at the build; tell me if it is red.\n";
    let mut s = Setup::start(
        "2026-11-24T10:00:00",
        &[],
        Some((heartbeat(30, None), Some(task))),
        None,
        &["HEARTBEAT_OK", "The build is red."],
    )
    .await;
    s.move_to("2026-11-24T10:29:59").await;
    assert_eq!(s.calls(), vec![]);
    s.move_to("2026-11-24T10:30:00").await;
    assert_eq!(s.calls(), calls(&[("heartbeat", task)]));
    assert_eq!(s.delivered(), vec![]);
    assert_eq!(s.entry(None).last_status.as_deref(), Some("silent"));
    s.move_to("2026-11-24T11:00:00").await;
    assert_eq!(s.calls().len(), 2);
    assert_eq!(
        s.delivered(),
        calls(&[("telegram:dm:7", "The build is red.")])
    );
}

#[tokio::test]
async fn the_heartbeat_skips_an_empty_file_a_busy_session_and_the_night() {
    let empty = "# HEARTBEAT.md\n\n## Tasks\n- [ ]\n-\n";
    let mut s = Setup::start(
        "2026-11-24T21:00:00",
        &[],
        Some((heartbeat(30, Some("08:00-22:00")), Some(empty))),
        None,
        &["checked"],
    )
    .await;
    s.move_to("2026-11-24T21:30:00").await;
    assert_eq!(s.calls(), vec![]);
    let why = s.entry(None).last_status.unwrap();
    assert!(
        why.starts_with("skipped: ") && why.ends_with("is missing or has no task"),
        "{why}"
    );
    // A task now, but the session is busy: no run stacked on it.
    std::fs::write(s.workspace.join("HEARTBEAT.md"), "Check the inbox.").unwrap();
    s.runs.busy.lock().insert("heartbeat".into());
    s.move_to("2026-11-24T22:00:00").await;
    // 22:00 is past the active hours: the next beat is at 08:00.
    s.move_to("2026-11-25T07:59:59").await;
    assert_eq!(s.calls(), vec![]);
    s.move_to("2026-11-25T08:00:00").await;
    assert_eq!(s.calls(), vec![]);
    assert_eq!(
        s.entry(None).last_status.as_deref(),
        Some("skipped: the session was busy")
    );
    s.runs.busy.lock().clear();
    s.move_to("2026-11-25T08:30:00").await;
    assert_eq!(s.calls(), calls(&[("heartbeat", "Check the inbox.")]));
}

#[tokio::test]
async fn a_missing_heartbeat_file_skips_the_run() {
    let mut s = Setup::start(
        "2026-11-24T10:00:00",
        &[],
        Some((heartbeat(30, None), None)),
        None,
        &[],
    )
    .await;
    s.move_to("2026-11-24T10:30:00").await;
    assert_eq!(s.calls(), vec![]);
    assert!(s.entry(None).last_status.unwrap().starts_with("skipped: "));
}

#[test]
fn heartbeat_md_without_a_task_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("HEARTBEAT.md");
    assert_eq!(heartbeat_prompt(&file), None);
    for empty in ["", "  \n\n", "# Title\n## Sub\n", "- \n* [ ]\n+ [x]\n#"] {
        std::fs::write(&file, empty).unwrap();
        assert_eq!(heartbeat_prompt(&file), None, "{empty:?}");
    }
    for task in ["Check mail", "#hashtag is text", "- water the plants"] {
        std::fs::write(&file, task).unwrap();
        assert_eq!(heartbeat_prompt(&file).as_deref(), Some(task));
    }
}

#[test]
fn invalid_jobs_are_named_and_the_others_run() {
    let mut bad_zone = job("zoned", "0 9 * * *", None, MissedRuns::Skip);
    bad_zone.timezone = Some("Mars/Olympus".into());
    let jobs = [
        job("ok", "0 9 * * *", None, MissedRuns::Skip),
        job("typo", "61 * * * *", None, MissedRuns::Skip),
        bad_zone,
        job("ok", "0 10 * * *", None, MissedRuns::Skip),
        job("", "0 9 * * *", None, MissedRuns::Skip),
    ];
    let bad_hours = HeartbeatConfig {
        active_hours: Some("9-5".into()),
        ..Default::default()
    };
    let plan = Plan::new(&jobs, Some(&bad_hours), Path::new("/c"), Path::new("/d"));
    assert_eq!(
        plan.jobs
            .iter()
            .map(|j| j.name.as_str())
            .collect::<Vec<_>>(),
        vec!["ok"]
    );
    assert_eq!(
        plan.problems(),
        vec![
            "[[cron]] job `typo`: the cron expression \"61 * * * *\" is not valid: Component error: Number out of bounds.; it will not run".to_string(),
            "[[cron]] job `zoned`: the time zone \"Mars/Olympus\" is unknown; use an IANA name such as \"Europe/Berlin\" or \"UTC\"; it will not run".to_string(),
            "[[cron]] job `ok`: another job has this name; give each job its own; it will not run".to_string(),
            "[[cron]] job `#5`: it has no `name`; it will not run".to_string(),
            "[heartbeat]: `active_hours = \"9-5\"`: write it as \"08:00-22:00\"; it will not run".to_string(),
        ]
    );
    let off = HeartbeatConfig {
        every_minutes: Some(0),
        ..Default::default()
    };
    let plan = Plan::new(&[], Some(&off), Path::new("/c"), Path::new("/d"));
    assert!(plan.heartbeat.is_none() && plan.heartbeat_error.is_none());
}

#[test]
fn the_listing_shows_next_and_last_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut berlin = job(
        "morning",
        "30 7 * * *",
        Some("telegram:dm:1"),
        MissedRuns::RunOnce,
    );
    berlin.timezone = Some("Europe/Berlin".into());
    berlin.session = Some("agent:main:main".into());
    let jobs = [berlin, job("bad", "x", None, MissedRuns::Skip)];
    let plan = Plan::new(&jobs, Some(&heartbeat(30, None)), dir.path(), dir.path());
    let mut record = stale("morning");
    record.jobs.get_mut("morning").unwrap().last_status = Some("ok".into());
    let list = listing(&plan, &record, &at("2026-11-24T10:00:00"));
    assert_eq!(
        list,
        json!({
            "jobs": [
                {
                    "name": "morning",
                    "schedule": "30 7 * * *",
                    "timezone": "Europe/Berlin",
                    "nextRun": {"atMs": ms("2026-11-25T06:30:00"), "text": "2026-11-25 07:30:00 CET"},
                    "lastRun": {"atMs": ms("2026-11-20T07:30:00"), "text": "2026-11-20 08:30:00 CET"},
                    "lastStatus": "ok",
                    "target": "telegram:dm:1",
                    "sessionKey": "agent:main:main",
                    "missed": "run_once",
                    "error": null,
                },
                {"name": "bad", "error": plan.invalid[0].error},
            ],
            "heartbeat": {
                "everyMinutes": 30,
                "activeHours": null,
                "nextRun": {"atMs": ms("2026-11-24T10:30:00"), "text": "2026-11-24 10:30:00 UTC"},
                "lastRun": null,
                "lastStatus": null,
                "target": "telegram:dm:7",
                "sessionKey": "heartbeat",
                "prompt": crate::config::workspace_dir(dir.path()).join("HEARTBEAT.md"),
                "promptEmpty": true,
                "error": null,
            },
        })
    );
}

#[test]
fn the_heartbeat_s_last_run_is_openclaw_s_heartbeat_event() {
    use serde_json::json;
    let target = Some("telegram:dm:42");
    assert_eq!(heartbeat_event("running", 5, target), None);
    assert_eq!(
        heartbeat_event("delivered to telegram:dm:42", 5, target),
        Some(json!({"ts": 5, "status": "sent", "channel": "telegram", "to": "telegram:dm:42"}))
    );
    assert_eq!(
        heartbeat_event("silent", 6, target),
        Some(json!({"ts": 6, "status": "ok-token", "channel": "telegram", "to": "telegram:dm:42"}))
    );
    assert_eq!(
        heartbeat_event("not delivered: no channel `telegram` is running", 7, target),
        Some(
            json!({"ts": 7, "status": "failed", "reason": "no channel `telegram` is running",
                    "channel": "telegram", "to": "telegram:dm:42"})
        )
    );
    assert_eq!(
        heartbeat_event("skipped: outside the active hours", 8, None),
        Some(json!({"ts": 8, "status": "skipped", "reason": "outside the active hours"}))
    );
    assert_eq!(
        heartbeat_event("failed: the model is down", 9, None),
        Some(json!({"ts": 9, "status": "failed", "reason": "the model is down"}))
    );
    let kept = heartbeat_event("ok", 10, None).unwrap();
    assert_eq!(
        (&kept["status"], &kept["reason"]),
        (&json!("skipped"), &json!("target-none"))
    );
}

/// A cluster's claims held in memory: the first claim of a run wins; a
/// store that is down answers every question with an error.
#[derive(Default)]
struct SharedClaims {
    taken: Mutex<std::collections::HashMap<(String, i64), usize>>,
    down: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl crate::cluster::Claims for SharedClaims {
    async fn claim(&self, name: &str, slot_ms: i64) -> Result<bool, String> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("the store is down".into());
        }
        let mut taken = self.taken.lock();
        let claims = taken.entry((name.to_string(), slot_ms)).or_default();
        *claims += 1;
        Ok(*claims == 1)
    }

    async fn last(&self, name: &str) -> Result<Option<i64>, String> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("the store is down".into());
        }
        Ok(self
            .taken
            .lock()
            .keys()
            .filter(|(n, _)| n == name)
            .map(|(_, slot)| *slot)
            .max())
    }

    async fn hold(&self, _name: &str) -> Result<bool, String> {
        Ok(!self.down.load(std::sync::atomic::Ordering::SeqCst))
    }

    async fn first(&self, id: &str) -> Result<bool, String> {
        self.claim(id, 0).await
    }
}

#[tokio::test]
async fn a_job_due_on_three_replicas_runs_on_one_and_a_store_that_is_down_runs_it_on_none() {
    let claims = Arc::new(SharedClaims::default());
    let jobs = [job("news", "0 * * * * *", None, MissedRuns::Skip)];
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let replica = Setup::replica(
            "2026-11-24T10:00:30",
            &jobs,
            None,
            None,
            &["a", "b"],
            claims.clone(),
        )
        .await;
        replicas.push(replica);
    }
    for replica in &mut replicas {
        replica.move_to("2026-11-24T10:01:00").await;
    }
    let runs: usize = replicas.iter().map(|r| r.calls().len()).sum();
    assert_eq!(runs, 1, "one run of 10:01 in the cluster");
    assert_eq!(
        claims
            .taken
            .lock()
            .get(&("cron:news".to_string(), ms("2026-11-24T10:01:00"))),
        Some(&3)
    );
    // With the store down, nobody runs 10:02, and each says why.
    claims.down.store(true, std::sync::atomic::Ordering::SeqCst);
    for replica in &mut replicas {
        replica.move_to("2026-11-24T10:02:00").await;
    }
    let runs: usize = replicas.iter().map(|r| r.calls().len()).sum();
    assert_eq!(runs, 1);
    for replica in &replicas {
        assert_eq!(
            replica.entry(Some("news")).last_status.as_deref(),
            Some("skipped: the cluster's store could not be reached")
        );
    }
}

#[tokio::test]
async fn a_replica_that_starts_later_does_not_catch_up_a_run_another_did() {
    let claims = Arc::new(SharedClaims::default());
    let jobs = [job("daily", "30 7 * * *", None, MissedRuns::RunOnce)];
    // The first replica, down since the 20th, catches up the run of the
    // 24th at 07:30 ...
    let first = Setup::replica(
        "2026-11-24T10:00:00",
        &jobs,
        None,
        Some(stale("daily")),
        &["done"],
        claims.clone(),
    )
    .await;
    assert_eq!(first.calls().len(), 1);
    // ... and a second, with the same old record of its own, does not do
    // it again.
    let second = Setup::replica(
        "2026-11-24T10:05:00",
        &jobs,
        None,
        Some(stale("daily")),
        &["again"],
        claims.clone(),
    )
    .await;
    assert_eq!(second.calls(), vec![]);
}

#[tokio::test]
async fn replicas_that_started_apart_beat_once_per_interval_between_them() {
    let claims = Arc::new(SharedClaims::default());
    let task = Some("- Look at the build");
    let mut early = Setup::replica(
        "2026-11-24T10:00:00",
        &[],
        Some((heartbeat(30, None), task)),
        None,
        &["HEARTBEAT_OK"; 8],
        claims.clone(),
    )
    .await;
    let mut late = Setup::replica(
        "2026-11-24T10:07:00",
        &[],
        Some((heartbeat(30, None), task)),
        None,
        &["HEARTBEAT_OK"; 8],
        claims.clone(),
    )
    .await;
    for minute in (10..=120).step_by(1) {
        let (h, m) = (10 + minute / 60, minute % 60);
        let time = format!("2026-11-24T{h:02}:{m:02}:00");
        early.move_to(&time).await;
        late.move_to(&time).await;
    }
    // 10:30, 11:00, 11:30 and 12:00: four intervals, four beats.
    let beats = early.calls().len() + late.calls().len();
    assert_eq!(beats, 4, "{:?} {:?}", early.calls(), late.calls());
}
