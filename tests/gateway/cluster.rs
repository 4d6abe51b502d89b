//! The team gateway on a real PostgreSQL server (started by the test on a
//! free port): several `pincer gateway` processes share its store, and
//! what must happen once happens once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::json;

use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::services::Postgres;
use support::sse::anthropic_text;

/// A cron expression (with seconds) for `seconds` from now, in UTC.
fn in_seconds(seconds: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds);
    format!(
        "{} * * * * *",
        at.to_zoned(jiff::tz::TimeZone::UTC).second()
    )
}

/// One replica's home, with `cluster` and `extra` in its config.
fn replica_home(cluster: &str, extra: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("title_model = \"none\"\n[gateway]\n\n[cluster]\n{cluster}\n\n{extra}\n"),
    )
    .unwrap();
    sandbox
}

async fn launch(sandbox: &Sandbox, mock: &MockModel) -> Gateway {
    let token = new_token();
    let cmd = gateway_command(sandbox, mock, Some(&token), &[]);
    Gateway::spawn(cmd, Some(&token)).await
}

#[tokio::test]
async fn a_cron_job_due_on_three_replicas_of_one_store_runs_once() {
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let mock = MockModel::start().await;
    for _ in 0..3 {
        mock.push(Reply::sse(anthropic_text("The news.", 5)));
    }
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let job = format!(
        "[[cron]]\nname = \"news\"\nschedule = \"{}\"\ntimezone = \"UTC\"\nprompt = \"News {marker}\"\n",
        in_seconds(12)
    );
    let homes: Vec<Sandbox> = (1..=3)
        .map(|i| {
            replica_home(
                &format!("store = \"{}\"\nreplica = \"r{i}\"", postgres.url()),
                &job,
            )
        })
        .collect();
    // All three at once: they apply the schema together.
    let (a, b, c) = tokio::join!(
        launch(&homes[0], &mock),
        launch(&homes[1], &mock),
        launch(&homes[2], &mock)
    );
    let replicas = [a, b, c];
    // A claim of the job's from eight days ago: the run's winner forgets
    // it (claims are kept a week).
    let old = jiff::Timestamp::now().as_millisecond() - 8 * 24 * 3600 * 1000;
    postgres.psql(&format!(
        "INSERT INTO pincer_schedule_claims (name, slot_ms, replica) VALUES ('cron:news', {old}, 'r0')"
    ));
    for (i, replica) in replicas.iter().enumerate() {
        let said = format!("cluster: replica `r{}` on store {}", i + 1, postgres.url());
        replica
            .stderr
            .wait_line(TIMEOUT, |l| l.contains(&said).then_some(()))
            .await
            .unwrap_or_else(|| panic!("no {said:?} in:\n{}", replica.stderr.text()));
    }
    mock.wait_for_requests(1, Duration::from_secs(90)).await;
    // Past the time, with room for a second run that must not come.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let prompts: Vec<String> = mock
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains(&marker))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(prompts.len(), 1, "the job ran {} times", prompts.len());
    let claims = postgres.psql("SELECT name, replica FROM pincer_schedule_claims");
    let lines: Vec<&str> = claims.lines().collect();
    assert_eq!(lines.len(), 1, "{claims}");
    assert!(lines[0].starts_with("cron:news|r"), "{claims}");
    // Every migration once, though three replicas applied them together.
    assert_eq!(
        postgres
            .psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM pincer_migrations"),
        "1,2,3,4,5,6"
    );
    assert_eq!(
        postgres.psql("SELECT string_agg(name, ',' ORDER BY name) FROM pincer_replicas"),
        "r1,r2,r3"
    );
    for replica in replicas {
        replica.stop().await;
    }
}

#[tokio::test]
async fn the_store_s_password_is_never_printed_and_an_unreachable_store_stops_the_start() {
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let mock = MockModel::start().await;
    // Trust authentication takes any password: the URL with one works.
    let with_password = postgres
        .url()
        .replacen("pincer@", "pincer:hunter2-secret@", 1);
    let home = replica_home(&format!("store = \"{with_password}\""), "");
    let gateway = launch(&home, &mock).await;
    let shown = postgres.url().replacen("pincer@", "pincer:***@", 1);
    gateway
        .stderr
        .wait_line(TIMEOUT, |l| l.contains(&shown).then_some(()))
        .await
        .unwrap_or_else(|| panic!("no {shown:?} in:\n{}", gateway.stderr.text()));
    let log = gateway.stop().await;
    assert!(!log.contains("hunter2-secret"), "{log}");
    // Nothing listens on the store's port once it is stopped.
    let port = postgres.port();
    drop(postgres);
    let home = replica_home(
        &format!("store = \"postgres://pincer:hunter2-secret@127.0.0.1:{port}/pincer\""),
        "",
    );
    let token = new_token();
    let out = tokio::time::timeout(
        TIMEOUT,
        gateway_command(&home, &mock, Some(&token), &[]).output(),
    )
    .await
    .expect("the gateway gave up on the store in time")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot reach the cluster store postgres://pincer:***@127.0.0.1:{port}/pincer"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2-secret"), "{stderr}");
}

/// `pincer cluster status --json` in `sandbox`, for `store`.
pub(crate) async fn status(sandbox: &Sandbox, store: &str) -> serde_json::Value {
    let out = sandbox
        .command(&["cluster", "status", "--store", store, "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn cluster_status_shows_the_replicas_and_one_killed_is_gone_after_its_lease() {
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let mock = MockModel::start().await;
    let homes: Vec<Sandbox> = ["a", "b"]
        .iter()
        .map(|name| {
            replica_home(
                &format!(
                    "store = \"{}\"\nreplica = \"{name}\"\nlease_seconds = 2",
                    postgres.url()
                ),
                "",
            )
        })
        .collect();
    let a = launch(&homes[0], &mock).await;
    // A replica gone for two days (each start under the default name is a
    // new one): the next to join forgets it.
    postgres.psql(
        "INSERT INTO pincer_replicas (name, version, seen_at) VALUES ('old', '0', now() - interval '2 days')",
    );
    let b = launch(&homes[1], &mock).await;
    let alive = |status: &serde_json::Value| -> Vec<(String, bool)> {
        status["replicas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().to_string(),
                    r["alive"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let both = status(&homes[0], &postgres.url()).await;
    assert_eq!(
        alive(&both),
        vec![("a".to_string(), true), ("b".to_string(), true)]
    );
    // `kill -9`: b says nothing more, and is gone once its lease ran out,
    // while a keeps renewing its own.
    b.stop().await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let after = status(&homes[0], &postgres.url()).await;
    assert_eq!(
        alive(&after),
        vec![("a".to_string(), true), ("b".to_string(), false)]
    );
    // The text form names the store without a password.
    let out = homes[0]
        .command(&["cluster", "status", "--store", &postgres.url()])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("store: {}", postgres.url())),
        "{text}"
    );
    assert!(text.contains("replica a: alive"), "{text}");
    assert!(text.contains("replica b: gone"), "{text}");
    assert!(
        text.contains("runs waiting for a replica to take them over: 0"),
        "{text}"
    );
    a.stop().await;
    // A session b held with a run going, and no replica left to take it
    // over: the run waits, and the counts say so.
    postgres.psql(
        "INSERT INTO pincer_sessions (key, session_id, replica, running) VALUES ('k1', 's1', 'b', 'run-1'), ('k2', 's2', 'b', NULL)",
    );
    let left = status(&homes[0], &postgres.url()).await;
    assert_eq!(left["waiting"], 1, "{left}");
    let b = &left["replicas"][1];
    assert_eq!(
        (&b["name"], &b["sessions"], &b["running"]),
        (&json!("b"), &json!(2), &json!(1)),
        "{left}"
    );
}

/// The heartbeat, overdue on three replicas when they start, runs once.
/// The replica that ran it is killed before it recorded the run and
/// starts again, overdue again, and a fourth replica joins: every run is
/// one interval's, claimed once (in the same half hour: none again).
#[tokio::test]
async fn the_heartbeat_runs_once_per_interval_across_replicas_and_a_replica_s_death() {
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let mock = MockModel::start().await;
    for _ in 0..4 {
        mock.push(Reply::sse(anthropic_text("HEARTBEAT_OK", 5)));
    }
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let long_ago = jiff::Timestamp::now().as_millisecond() - 2 * 365 * 24 * 3600 * 1000;
    let overdue = |home: &Sandbox| {
        std::fs::write(
            home.home().join("cron.json"),
            json!({"heartbeat": {"lastRunMs": long_ago}}).to_string(),
        )
        .unwrap();
    };
    let homes: Vec<Sandbox> = (1..=4)
        .map(|i| {
            let home = replica_home(
                &format!(
                    "store = \"{}\"\nreplica = \"r{i}\"\nlease_seconds = 2",
                    postgres.url()
                ),
                "[heartbeat]\nevery_minutes = 30\n",
            );
            let workspace = home.home().join("agents/main/workspace");
            std::fs::create_dir_all(&workspace).unwrap();
            std::fs::write(
                workspace.join("HEARTBEAT.md"),
                format!("# Checks\n- Is build {marker} red?\n"),
            )
            .unwrap();
            overdue(&home);
            home
        })
        .collect();
    let joined = async |gateway: &Gateway, i: usize| {
        let said = format!("cluster: replica `r{i}` on store");
        gateway
            .stderr
            .wait_line(TIMEOUT, |l| l.contains(&said).then_some(()))
            .await
            .unwrap_or_else(|| panic!("no {said:?} in:\n{}", gateway.stderr.text()));
    };
    let (a, b, c) = tokio::join!(
        launch(&homes[0], &mock),
        launch(&homes[1], &mock),
        launch(&homes[2], &mock)
    );
    let mut replicas = vec![Some(a), Some(b), Some(c)];
    for (i, replica) in replicas.iter().enumerate() {
        joined(replica.as_ref().unwrap(), i + 1).await;
    }
    mock.wait_for_requests(1, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let runs = || {
        mock.requests()
            .iter()
            .filter(|r| r.body.to_string().contains(&marker))
            .count()
    };
    let slots = || {
        postgres
            .psql("SELECT count(*) FROM pincer_schedule_claims WHERE name = 'heartbeat'")
            .parse::<usize>()
            .unwrap()
    };
    assert_eq!(
        runs(),
        1,
        "three replicas ran the heartbeat {} times",
        runs()
    );
    assert_eq!(slots(), 1);
    let ran = postgres.psql("SELECT replica FROM pincer_schedule_claims WHERE name = 'heartbeat'");
    let index: usize = ran.trim_start_matches('r').parse::<usize>().unwrap() - 1;

    // Killed before it wrote down the run: it comes back overdue.
    replicas[index].take().unwrap().stop().await;
    overdue(&homes[index]);
    let (again, fourth) = tokio::join!(launch(&homes[index], &mock), launch(&homes[3], &mock));
    joined(&again, index + 1).await;
    joined(&fourth, 4).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    // Runs only of intervals claimed, each once: one, unless the test
    // crossed into the next half hour, whose run is due.
    assert_eq!(runs(), slots(), "a run that was not claimed");
    assert!(slots() <= 2, "{} intervals claimed", slots());
    replicas.push(Some(again));
    replicas.push(Some(fourth));
    for replica in replicas.into_iter().flatten() {
        replica.stop().await;
    }
}
