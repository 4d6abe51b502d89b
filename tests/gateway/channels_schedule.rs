//! Heartbeat and cron end to end: the real `pincer gateway` runs the
//! user's `[[cron]]` jobs and `[heartbeat]` against the mock model and
//! delivers their replies to a Telegram chat (tests/support/telegram_api.rs,
//! a local Bot API). Runs missed while the gateway was down are caught up
//! once or skipped across a real restart; silent replies never reach the
//! chat; `pincer cron list` and the web page show the jobs. The scheduler's
//! decisions at any time are tested with a manual clock in
//! src/gateway/scheduler.rs; here the clock is the system's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::browser::{Browser, Emulation, Engine};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_text;
use support::telegram_api::TelegramApi;

const OWNER: i64 = 123_456_789;

/// A cron job that fires soon: a seconds expression matching one second of
/// each minute, a few seconds from now (the next minute's, if the gateway
/// was slower than that to start).
fn soon() -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(4);
    format!(
        "{} * * * * *",
        at.to_zoned(jiff::tz::TimeZone::UTC).second()
    )
}

struct Setup {
    sandbox: Sandbox,
    mock: MockModel,
    api: TelegramApi,
    gateway: Option<Gateway>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(gateway) = &self.gateway
        {
            eprintln!("gateway stderr:\n{}", gateway.stderr.text());
        }
    }
}

impl Setup {
    /// The user's config: the Telegram channel at the mock Bot API, then
    /// `extra` (the jobs).
    async fn new(extra: &str) -> Self {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let api = TelegramApi::start().await;
        std::fs::write(
            sandbox.home().join("config.toml"),
            format!(
                "title_model = \"none\"\n[gateway]\n\n[channels.telegram]\napi_url = \"{}\"\nallow = [\"{OWNER}\"]\npoll_timeout_secs = 5\n\n{extra}\n",
                api.url
            ),
        )
        .unwrap();
        Self {
            sandbox,
            mock,
            api,
            gateway: None,
        }
    }

    /// What an earlier gateway recorded: `cron.json`.
    fn record(&self, record: Value) {
        std::fs::write(
            self.sandbox.home().join("cron.json"),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
    }

    fn heartbeat_md(&self, text: &str) {
        let dir = self.sandbox.home().join("agents/main/workspace");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("HEARTBEAT.md"), text).unwrap();
    }

    async fn launch(&mut self) {
        let token = new_token();
        let mut cmd = gateway_command(&self.sandbox, &self.mock, Some(&token), &[]);
        cmd.env("TELEGRAM_BOT_TOKEN", &self.api.token);
        self.gateway = Some(Gateway::spawn(cmd, Some(&token)).await);
    }

    async fn stop(&mut self) -> String {
        self.gateway.take().unwrap().stop().await
    }

    fn gateway(&self) -> &Gateway {
        self.gateway.as_ref().unwrap()
    }

    /// Waits for a stderr line containing `text`.
    async fn line(&self, text: &str) {
        self.gateway()
            .stderr
            .wait_line(TIMEOUT, |l| l.contains(text).then_some(()))
            .await
            .unwrap_or_else(|| panic!("no line with {text:?}"));
    }

    /// `cron.list` as a read-only client sees it.
    async fn cron_list(&self) -> Value {
        let mut client = self.gateway().operator(&["operator.read"], &[]).await;
        let answer = client.call("cron.list", json!({})).await;
        assert_eq!(answer["ok"], true, "{answer}");
        answer["payload"].clone()
    }

    /// Waits until the heartbeat's last status is `status`.
    async fn until_heartbeat(&self, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let row = self.cron_list().await["heartbeat"].clone();
            if row["lastStatus"] == status {
                return row;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the heartbeat never got to {status:?}: {row}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the job's record (OpenClaw's, from `cron.list`) has
    /// each field of `state` in its `state`.
    async fn until_job(&self, name: &str, state: Value) -> Value {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let list = self.cron_list().await;
            let row = list["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|j| j["name"] == name)
                .cloned()
                .unwrap();
            let fields = state.as_object().unwrap();
            if fields.iter().all(|(k, v)| row["state"][k] == *v) {
                return row;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} never got to {state}: {row}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `chat.history` of `key`: each message's role and text.
    async fn history(&self, key: &str) -> Vec<(String, String)> {
        let mut client = self.gateway().admin().await;
        let answer = client
            .call("chat.history", json!({"sessionKey": key}))
            .await;
        answer["payload"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let text = match &m["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(blocks) => blocks
                        .iter()
                        .filter(|b| b["type"] == "text")
                        .filter_map(|b| b["text"].as_str())
                        .collect::<Vec<_>>()
                        .join(""),
                    _ => String::new(),
                };
                (m["role"].as_str().unwrap_or_default().to_string(), text)
            })
            .collect()
    }

    /// The prompts the model was sent (each request's first user text).
    fn prompts(&self) -> Vec<String> {
        self.mock
            .requests()
            .iter()
            .map(|r| {
                let first = &r.body["messages"][0]["content"];
                match first {
                    Value::String(s) => s.clone(),
                    Value::Array(blocks) => blocks[0]["text"].as_str().unwrap().to_string(),
                    _ => String::new(),
                }
            })
            .collect()
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Milliseconds since the epoch of two years ago: a run long past.
fn long_ago() -> i64 {
    jiff::Timestamp::now().as_millisecond() - 2 * 365 * 24 * 3600 * 1000
}

#[tokio::test]
async fn a_cron_job_with_seconds_runs_and_its_reply_reaches_its_chat() {
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let prompt = format!("Summarise the news {marker}");
    let mut setup = Setup::new(&format!(
        "[[cron]]\nname = \"news\"\nschedule = \"{}\"\ntimezone = \"UTC\"\nprompt = \"{prompt}\"\ntarget = \"telegram:dm:{OWNER}\"\n\n\
         [[cron]]\nname = \"typo\"\nschedule = \"61 * * * *\"\nprompt = \"never\"\n\n\
         [[cron]]\nname = \"zoned\"\nschedule = \"0 9 * * *\"\ntimezone = \"Mars/Olympus\"\nprompt = \"never\"\n",
        soon()
    ))
    .await;
    let reply = format!("Three things happened today. {marker}");
    setup.mock.push(Reply::sse(anthropic_text(&reply, 10)));
    setup.launch().await;
    // The jobs that cannot run are named; the others still run.
    setup
        .line("[[cron]] job `typo`: the cron expression \"61 * * * *\" is not valid")
        .await;
    setup
        .line("[[cron]] job `zoned`: the time zone \"Mars/Olympus\" is unknown")
        .await;
    setup
        .mock
        .wait_for_requests(1, Duration::from_secs(90))
        .await;
    let shown = setup
        .api
        .until("the reply in the owner's chat", |api| {
            let chat = api.chat(OWNER);
            (!chat.is_empty()).then_some(chat)
        })
        .await;
    let texts: Vec<&str> = shown.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, vec![reply.as_str()]);
    assert_eq!(setup.prompts(), vec![prompt.clone()]);
    let row = setup
        .until_job(
            "news",
            json!({"lastRunStatus": "ok", "lastDeliveryStatus": "delivered", "lastDelivered": true}),
        )
        .await;
    assert_eq!(row["sessionKey"], "cron:news");
    assert_eq!(
        setup.history("cron:news").await,
        pairs(&[("user", &prompt), ("assistant", &reply)])
    );
    assert_eq!(setup.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn silent_replies_of_the_heartbeat_and_of_a_job_are_never_delivered() {
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let task = format!("# Checks\n- Is the build {marker} red? Tell me if so.\n");
    let mut setup = Setup::new(&format!(
        "[heartbeat]\nevery_minutes = 30\ntarget = \"telegram:dm:{OWNER}\"\n\n\
         [[cron]]\nname = \"quiet\"\nschedule = \"0 0 1 1 *\"\ntimezone = \"UTC\"\nprompt = \"Anything new {marker}?\"\ntarget = \"telegram:dm:{OWNER}\"\nmissed = \"run_once\"\n"
    ))
    .await;
    setup.heartbeat_md(&task);
    // Both are overdue: the heartbeat and the job run at once.
    let ago = long_ago();
    setup.record(json!({
        "jobs": {"quiet": {"lastRunMs": ago}},
        "heartbeat": {"lastRunMs": ago},
    }));
    setup
        .mock
        .push(Reply::sse(anthropic_text("HEARTBEAT_OK", 10)));
    setup
        .mock
        .push(Reply::sse(anthropic_text("HEARTBEAT_OK", 10)));
    setup.launch().await;
    setup.until_heartbeat("silent").await;
    // OpenClaw's `last-heartbeat`: nothing to say, for its target.
    let mut client = setup.gateway().operator(&["operator.read"], &[]).await;
    let last = client.call_ok("last-heartbeat", json!({})).await;
    assert_eq!(
        (&last["status"], &last["channel"], &last["to"]),
        (
            &json!("ok-token"),
            &json!("telegram"),
            &json!(format!("telegram:dm:{OWNER}"))
        ),
        "{last}"
    );
    assert!(last["ts"].as_i64().unwrap() > ago, "{last}");
    setup
        .until_job(
            "quiet",
            json!({"lastRunStatus": "ok", "deliverySuppressionReason": "silent"}),
        )
        .await;
    let mut prompts = setup.prompts();
    prompts.sort();
    let mut expected = vec![format!("Anything new {marker}?"), task.clone()];
    expected.sort();
    assert_eq!(prompts, expected);
    // The channel sent nothing at all to the owner's chat.
    assert_eq!(setup.api.chat(OWNER), vec![]);
    assert_eq!(setup.api.calls_of("sendMessage").len(), 0);
    assert_eq!(
        setup.history("heartbeat").await,
        pairs(&[("user", &task), ("assistant", "HEARTBEAT_OK")])
    );
    assert_eq!(setup.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn no_reply_from_a_job_is_not_delivered_and_an_empty_heartbeat_md_runs_nothing() {
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let mut setup = Setup::new(&format!(
        "[heartbeat]\nevery_minutes = 30\ntarget = \"telegram:dm:{OWNER}\"\n\n\
         [[cron]]\nname = \"hush\"\nschedule = \"0 0 1 1 *\"\ntimezone = \"UTC\"\nprompt = \"Quiet {marker}\"\ntarget = \"telegram:dm:{OWNER}\"\nmissed = \"run_once\"\n"
    ))
    .await;
    setup.heartbeat_md("# HEARTBEAT.md\n\n- [ ]\n");
    let ago = long_ago();
    setup.record(json!({
        "jobs": {"hush": {"lastRunMs": ago}},
        "heartbeat": {"lastRunMs": ago},
    }));
    setup.mock.push(Reply::sse(anthropic_text("NO_REPLY", 10)));
    setup.launch().await;
    setup
        .until_job(
            "hush",
            json!({"lastRunStatus": "ok", "deliverySuppressionReason": "silent"}),
        )
        .await;
    let beat = setup.cron_list().await["heartbeat"].clone();
    assert!(
        beat["lastStatus"]
            .as_str()
            .unwrap()
            .ends_with("HEARTBEAT.md is missing or has no task"),
        "{beat}"
    );
    assert_eq!(setup.prompts(), vec![format!("Quiet {marker}")]);
    assert_eq!(setup.api.calls_of("sendMessage").len(), 0);
    assert_eq!(setup.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn run_once_catches_up_one_missed_run_after_a_restart_and_skip_does_not() {
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let mut setup = Setup::new(&format!(
        "[[cron]]\nname = \"skipper\"\nschedule = \"0 0 1 1 *\"\ntimezone = \"UTC\"\nprompt = \"skipped {marker}\"\nmissed = \"skip\"\n\n\
         [[cron]]\nname = \"catcher\"\nschedule = \"0 0 1 1 *\"\ntimezone = \"UTC\"\nprompt = \"caught up {marker}\"\nmissed = \"run_once\"\ntarget = \"slack:dm:U1\"\n"
    ))
    .await;
    // Two new years passed while the gateway was down.
    let ago = long_ago();
    setup.record(json!({"jobs": {
        "skipper": {"lastRunMs": ago},
        "catcher": {"lastRunMs": ago},
    }}));
    setup
        .mock
        .push(Reply::sse(anthropic_text("Caught up.", 10)));
    setup.launch().await;
    // A target on a channel that is not running: a warning, and the run
    // happens all the same.
    setup
        .line("warning: cron job `catcher` sends its replies to `slack:dm:U1`, but no channel `slack` is running")
        .await;
    setup
        .line("cron job `skipper`: skipped the runs missed while the gateway was down")
        .await;
    setup
        .line("cron job `catcher`: runs missed while the gateway was down; running it once now")
        .await;
    let row = setup
        .until_job(
            "catcher",
            json!({
                "lastRunStatus": "ok",
                "lastDeliveryStatus": "not-delivered",
                "lastDelivered": false,
                "lastDeliveryError": "no channel `slack` is running for target `slack:dm:U1`",
            }),
        )
        .await;
    let caught_at = row["state"]["lastRunAtMs"].as_i64().unwrap();
    assert!(caught_at > ago, "{row}");
    assert_eq!(setup.prompts(), vec![format!("caught up {marker}")]);
    let list = setup.cron_list().await;
    let skipper = &list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == "skipper")
        .unwrap();
    assert_eq!(skipper["state"]["lastRunAtMs"], ago, "{skipper}");
    assert_eq!(skipper["state"]["lastRunStatus"], "skipped", "{skipper}");
    assert_eq!(
        skipper["state"]["lastError"],
        "missed while the gateway was down"
    );

    // A restart: nothing is missed any more, nothing runs again.
    setup.stop().await;
    setup.launch().await;
    setup.line("cron job `catcher`: next run").await;
    setup.line("cron job `skipper`: next run").await;
    let list = setup.cron_list().await;
    let last_run = |id: &str| {
        list["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .unwrap()["state"]["lastRunAtMs"]
            .clone()
    };
    assert_eq!(last_run("catcher"), caught_at);
    assert_eq!(last_run("skipper"), ago);
    let stderr = setup.stop().await;
    assert!(!stderr.contains("running it once now"), "{stderr}");
    assert!(!stderr.contains("skipped the runs missed"), "{stderr}");
    assert_eq!(setup.prompts().len(), 1);
    assert_eq!(setup.mock.violations(), Vec::<String>::new());
}

/// `pincer cron list` with no gateway running: the config and the record.
#[tokio::test]
async fn cron_list_shows_each_job_and_the_heartbeat_without_a_gateway() {
    let setup = Setup::new(
        "[heartbeat]\nevery_minutes = 45\nactive_hours = \"08:00-22:00\"\ntarget = \"telegram:dm:5\"\n\n\
         [[cron]]\nname = \"yearly\"\nschedule = \"0 0 1 1 *\"\ntimezone = \"Europe/Berlin\"\nprompt = \"Happy new year\"\ntarget = \"telegram:dm:5\"\nmissed = \"run_once\"\n\n\
         [[cron]]\nname = \"broken\"\nschedule = \"every day\"\nprompt = \"x\"\n",
    )
    .await;
    let ran = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    setup.record(json!({"jobs": {"yearly": {"lastRunMs": ran.as_millisecond(), "lastStatus": "delivered to telegram:dm:5"}}}));
    let output = setup
        .sandbox
        .command(&["cron", "list"])
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let now = jiff::Zoned::now().with_time_zone(berlin.clone());
    let next = jiff::civil::date(now.year() + 1, 1, 1)
        .to_zoned(berlin.clone())
        .unwrap();
    let workspace = setup
        .sandbox
        .home()
        .join("agents/main/workspace/HEARTBEAT.md");
    let expected = format!(
        "yearly\n  schedule: 0 0 1 1 * (Europe/Berlin)\n  next run: {}\n  last run: {} (delivered to telegram:dm:5)\n  target: telegram:dm:5\n  session: cron:yearly\n  missed runs: run_once\n\n\
         broken\n  error: [[cron]] job `broken`: the cron expression \"every day\" is not valid: Invalid pattern: Pattern must have between 5 and 7 fields.; it will not run\n\n\
         heartbeat\n  every: 45 min, active hours: 08:00-22:00\n  next run: {}\n  last run: never\n  target: telegram:dm:5\n  session: heartbeat\n  prompt: {} (missing or without a task: runs are skipped)\n",
        next.strftime("%Y-%m-%d %H:%M:%S %Z"),
        ran.to_zoned(berlin).strftime("%Y-%m-%d %H:%M:%S %Z"),
        "{NEXT_BEAT}",
        workspace.display(),
    );
    let text = String::from_utf8(output.stdout).unwrap();
    // The heartbeat's next run depends on the minute the command ran.
    let beat = text
        .lines()
        .filter(|l| l.starts_with("  next run: "))
        .nth(1)
        .unwrap()
        .trim_start_matches("  next run: ")
        .to_string();
    assert_eq!(text, expected.replace("{NEXT_BEAT}", &beat));

    let json_out = setup
        .sandbox
        .command(&["cron", "list", "--json"])
        .output()
        .await
        .unwrap();
    let list: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    assert_eq!(
        list["jobs"][0]["nextRun"]["atMs"],
        next.timestamp().as_millisecond()
    );
    assert_eq!(list["jobs"][0]["lastRun"]["atMs"], ran.as_millisecond());
    assert_eq!(list["heartbeat"]["everyMinutes"], 45);
}

#[tokio::test]
async fn the_web_page_lists_the_scheduled_jobs_with_their_next_run() {
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let mut setup = Setup::new(&format!(
        "[heartbeat]\nevery_minutes = 30\n\n\
         [[cron]]\nname = \"<b>digest {marker}</b>\"\nschedule = \"0 0 1 1 *\"\ntimezone = \"UTC\"\nprompt = \"x\"\n"
    ))
    .await;
    setup.launch().await;
    let browser = Browser::launch(Engine::Chromium, 1280, 900, Emulation::default()).await;
    let gateway = setup.gateway();
    browser
        .sign_in(gateway.addr, gateway.token.as_deref().unwrap())
        .await;
    browser
        .until(
            "the Scheduled list",
            "return document.querySelectorAll('[data-testid=scheduled-item]').length === 2;",
        )
        .await;
    let items = browser
        .eval(
            "return [...document.querySelectorAll('[data-testid=scheduled-item]')].map(li => [li.children[0].textContent, li.children[1].textContent.startsWith('next '), li.children.length]);",
        )
        .await;
    // The name is text, never markup.
    assert_eq!(
        items,
        json!([
            [format!("<b>digest {marker}</b>"), true, 2],
            ["Heartbeat", true, 2]
        ])
    );
    let heading = browser
        .eval("const s = document.querySelector('[data-testid=scheduled]'); return [s.hidden, s.querySelector('h2').textContent, s.querySelectorAll('b').length];")
        .await;
    assert_eq!(heading, json!([false, "Scheduled", 0]));
    browser.screenshot("scheduled").await;
}

/// The `cron.*` methods as OpenClaw's clients call them: job records with
/// their schedule, prompt, delivery and last run, pages whose counts add
/// up, filters, one job, the status, the last runs, a `cron` event for a
/// run, and the changes pincer takes from its config only, refused.
#[tokio::test]
async fn cron_methods_answer_in_openclaw_s_shapes() {
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let mut setup = Setup::new(&format!(
        "[[cron]]\nname = \"alpha\"\nschedule = \"0 0 1 1 *\"\ntimezone = \"UTC\"\nprompt = \"Year {marker}\"\ntarget = \"telegram:dm:{OWNER}\"\n\n\
         [[cron]]\nname = \"beta\"\nschedule = \"0 9 * * *\"\ntimezone = \"Europe/Berlin\"\nprompt = \"Morning\"\n\n\
         [[cron]]\nname = \"gamma\"\nschedule = \"{}\"\ntimezone = \"UTC\"\nprompt = \"Soon {marker}\"\n",
        soon()
    ))
    .await;
    // A minute ago: no run of alpha's was missed since.
    let ran = jiff::Timestamp::now().as_millisecond() - 60_000;
    setup.record(json!({"jobs": {
        "alpha": {"sinceMs": ran, "lastRunMs": ran, "lastStatus": "failed: the model was down", "lastStatusMs": ran + 1500},
    }}));
    setup
        .mock
        .push(Reply::sse(anthropic_text("Done soon.", 10)));
    setup.launch().await;
    let mut client = setup.gateway().operator(&["operator.read"], &[]).await;

    // A page of two of the three, sorted by next run, with counts that add
    // up and the next offset.
    let page = client
        .call_ok(
            "cron.list",
            json!({"includeDisabled": true, "limit": 2, "offset": 0, "enabled": "all",
                   "scheduleKind": "all", "lastRunStatus": "all", "trigger": "all",
                   "sortBy": "name", "sortDir": "asc"}),
        )
        .await;
    let ids: Vec<&str> = page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alpha", "beta"], "{page}");
    assert_eq!(
        (
            &page["total"],
            &page["offset"],
            &page["limit"],
            &page["hasMore"],
            &page["nextOffset"]
        ),
        (&json!(3), &json!(0), &json!(2), &json!(true), &json!(2)),
        "{page}"
    );
    let revision = page["snapshotRevision"].as_str().unwrap().to_string();
    assert!(revision.starts_with("sha256:"), "{page}");
    let alpha = &page["jobs"][0];
    assert_eq!(
        alpha["schedule"],
        json!({"kind": "cron", "expr": "0 0 1 1 *", "tz": "UTC"})
    );
    assert_eq!(
        alpha["payload"],
        json!({"kind": "agentTurn", "message": format!("Year {marker}")})
    );
    assert_eq!(
        alpha["delivery"],
        json!({"mode": "announce", "channel": "telegram", "to": format!("dm:{OWNER}")})
    );
    assert_eq!(alpha["sessionTarget"], "session:cron:alpha");
    assert_eq!(alpha["enabled"], true);
    assert!(
        alpha["configRevision"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(alpha["state"]["lastRunStatus"], "error", "{alpha}");
    assert_eq!(alpha["state"]["lastError"], "the model was down");
    assert_eq!(alpha["state"]["lastRunAtMs"], ran);
    assert_eq!(alpha["state"]["lastDurationMs"], 1500);
    assert!(alpha["state"]["nextRunAtMs"].as_i64().unwrap() > ran);
    assert_eq!(alpha["lastRunStatus"], "error");
    // The rest (its revision is compared below, once gamma's run, which
    // changes gamma's record, is over).
    let rest = client
        .call_ok(
            "cron.list",
            json!({"limit": 2, "offset": 2, "sortBy": "name"}),
        )
        .await;
    assert_eq!(rest["jobs"][0]["id"], "gamma", "{rest}");
    assert_eq!(
        (&rest["hasMore"], &rest["nextOffset"]),
        (&json!(false), &Value::Null)
    );
    // Filters: pincer's jobs are all enabled cron expressions.
    for (filter, count) in [
        (json!({"lastRunStatus": "error"}), 1),
        (json!({"lastRunStatus": "unknown"}), 2),
        (json!({"enabled": "disabled"}), 0),
        (json!({"scheduleKind": "every"}), 0),
        (json!({"query": "BET"}), 1),
        (json!({"sessionKey": "agent:main:cron:beta"}), 1),
    ] {
        let listed = client.call_ok("cron.list", filter.clone()).await;
        assert_eq!(listed["total"], count, "{filter}: {listed}");
    }
    // The inbox's compact rows carry their run times, null when none.
    let compact = client
        .call_ok("cron.list", json!({"compact": true, "sortBy": "name"}))
        .await;
    let beta = &compact["jobs"][1];
    assert_eq!(beta["lastRunAtMs"], Value::Null, "{compact}");
    assert_eq!(beta["lastRunStatus"], Value::Null);
    assert!(beta["nextRunAtMs"].is_i64());
    assert_eq!(beta["scheduleKind"], "cron");
    // Refused, each naming what: an unknown field, a sort pincer lacks.
    for (params, says) in [
        (json!({"nope": 1}), "`nope` is not supported by pincer"),
        (json!({"sortBy": "size"}), "unknown variant `size`"),
        (
            json!({"includeDeliveryPreviews": true}),
            "includeDeliveryPreviews",
        ),
    ] {
        let answer = client.call("cron.list", params.clone()).await;
        assert_eq!(answer["ok"], false, "{params}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{params}: {message}");
    }

    // One job, and one that is not there.
    let beta = client.call_ok("cron.get", json!({"id": "beta"})).await;
    assert_eq!(beta["schedule"]["tz"], "Europe/Berlin", "{beta}");
    let missing = client.call("cron.get", json!({"id": "delta"})).await;
    assert_eq!(
        missing["error"]["details"]["code"], "CRON_JOB_NOT_FOUND",
        "{missing}"
    );

    let status = client.call_ok("cron.status", json!({})).await;
    assert_eq!(status["enabled"], true, "{status}");
    assert_eq!(status["jobs"], 3);
    assert!(status["nextWakeAtMs"].is_i64());

    // The job that runs soon: a `cron` event when it starts and when it
    // ends, and its run in `cron.runs`, newest first.
    let started = client.next_event("cron").await["payload"].clone();
    assert_eq!(
        (&started["jobId"], &started["action"]),
        (&json!("gamma"), &json!("started")),
        "{started}"
    );
    let finished = client.next_event("cron").await["payload"].clone();
    assert_eq!(finished["action"], "finished", "{finished}");
    assert_eq!(finished["status"], "ok", "{finished}");
    assert_eq!(finished["job"]["id"], "gamma");
    // Nothing runs now for a minute: both pages are of one snapshot, and
    // it is not the one before gamma ran.
    let first = client
        .call_ok("cron.list", json!({"limit": 2, "sortBy": "name"}))
        .await;
    let rest = client
        .call_ok(
            "cron.list",
            json!({"limit": 2, "offset": 2, "sortBy": "name"}),
        )
        .await;
    assert_eq!(rest["snapshotRevision"], first["snapshotRevision"]);
    assert_ne!(first["snapshotRevision"], revision.as_str());
    let runs = client
        .call_ok(
            "cron.runs",
            json!({"scope": "all", "limit": 50, "offset": 0, "status": "all", "sortDir": "desc"}),
        )
        .await;
    let jobs: Vec<&str> = runs["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["jobId"].as_str().unwrap())
        .collect();
    assert_eq!(jobs, ["gamma", "alpha"], "{runs}");
    assert_eq!(runs["entries"][1]["status"], "error");
    assert_eq!(runs["entries"][1]["error"], "the model was down");
    assert_eq!(runs["entries"][0]["sessionKey"], "cron:gamma");
    assert_eq!(
        (&runs["total"], &runs["hasMore"]),
        (&json!(2), &json!(false))
    );
    let one = client
        .call_ok("cron.runs", json!({"scope": "job", "id": "alpha"}))
        .await;
    assert_eq!(one["total"], 1, "{one}");

    // Jobs are changed in config.toml, and said so.
    let mut admin = setup.gateway().operator(&[], &[]).await;
    for method in ["cron.add", "cron.update", "cron.remove", "cron.run"] {
        let answer = admin.call(method, json!({"id": "alpha"})).await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("not supported by pincer"),
            "{method}: {answer}"
        );
    }
    assert_eq!(setup.mock.violations(), Vec::<String>::new());
}
