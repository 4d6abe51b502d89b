//! How fast a team gateway's replica writes its runs' events to
//! PostgreSQL, and reads one run's back.
//!
//! A private PostgreSQL (tests/support/services.rs, with its default
//! durability: every commit flushed to disk) gets `PINCER_BENCH_EVENTS`
//! (default 200,000) events of `PINCER_BENCH_RUNS_AT_ONCE` (60) runs at
//! once, each a text delta as the replica tells it on the bus (about 330
//! bytes), through the store's own writer (the sink the hub hands them to,
//! many a statement). The time is from the first event handed over until
//! the last is in the table. Then one run's events are read back in order
//! from the first, as a replica catching up with it does. Each is done
//! `PINCER_BENCH_ROUNDS` (3) times on a fresh table; the figures are the
//! median, min and max. Target: at least 5,000 events a second written.
//! Last, `PINCER_BENCH_PACED` (10,000) events a second are handed over
//! for 3 seconds, a few every millisecond, as runs streaming at once
//! hand them, and the time from the last handed to the last written is
//! the writer's lag.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use pincer::cluster::postgres::Store;
use pincer::cluster::{RunEvent, Sessions};
use support::services::Postgres;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A text delta of `run`, as the bus carries it.
fn delta(run: &str, session: &str, seq: u64) -> String {
    format!(
        r#"{{"from":"bench","told":{{"update":{{"key":"agent:main:{session}","notification":{{"sessionId":"{session}","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"word{seq} "}}}}}}}}}},"at":{{"run":"{run}","seq":{seq}}}}}"#
    )
}

fn stats(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        values[values.len() / 2],
        values[0],
        values[values.len() - 1],
    )
}

fn main() {
    let events = env_count("PINCER_BENCH_EVENTS", 200_000);
    let runs = env_count("PINCER_BENCH_RUNS_AT_ONCE", 60).max(1);
    let rounds = env_count("PINCER_BENCH_ROUNDS", 3).max(1);
    let postgres = Postgres::start_durable();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let paced = env_count("PINCER_BENCH_PACED", 10_000);
    let (mut written, mut read, mut lags) = (Vec::new(), Vec::new(), Vec::new());
    let mut per_run = 0;
    for round in 0..rounds {
        let url = postgres.url();
        let (rate, read_rate, n, lag) = runtime.block_on(async move {
            let store = Store::connect(&url, &format!("bench-{round}"))
                .await
                .unwrap();
            store.store_events();
            let sink = store.event_sink().unwrap();
            let (counter, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            let ids: Vec<(String, String)> = (0..runs)
                .map(|r| (format!("run-{round}-{r}"), format!("session-{r}")))
                .collect();
            // Made before the clock starts: the bench times the store.
            let mut made = Vec::with_capacity(events);
            for i in 0..events {
                let (run, session) = &ids[i % runs];
                let seq = (i / runs + 1) as u64;
                made.push(RunEvent::Told {
                    run: run.clone(),
                    seq,
                    event: delta(run, session, seq),
                });
            }
            let started = Instant::now();
            for event in made {
                sink(event);
            }
            let counted =
                format!("SELECT count(*) FROM pincer_run_events WHERE run LIKE 'run-{round}-%'");
            loop {
                let count: i64 = counter.query_one(&counted, &[]).await.unwrap().get(0);
                if count as usize >= events {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(600),
                    "only {count} of {events} events were written"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let rate = events as f64 / started.elapsed().as_secs_f64();
            // Then as a stream: `paced` events a second for 3 seconds,
            // handed over every millisecond, as runs streaming at once
            // hand them; the lag is from the last handed to the last
            // written.
            let streams: Vec<(String, String)> = (0..runs)
                .map(|r| (format!("paced-{round}-{r}"), format!("session-{r}")))
                .collect();
            let streamed =
                format!("SELECT count(*) FROM pincer_run_events WHERE run LIKE 'paced-{round}-%'");
            let total = paced * 3;
            let mut handed = 0;
            let started = Instant::now();
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            while handed < total {
                tick.tick().await;
                let due = ((started.elapsed().as_secs_f64() * paced as f64) as usize).min(total);
                while handed < due {
                    let (run, session) = &streams[handed % runs];
                    let seq = (handed / runs + 1) as u64;
                    sink(RunEvent::Told {
                        run: run.clone(),
                        seq,
                        event: delta(run, session, seq),
                    });
                    handed += 1;
                }
            }
            let last_handed = Instant::now();
            loop {
                let count: i64 = counter.query_one(&streamed, &[]).await.unwrap().get(0);
                if count as usize >= total {
                    break;
                }
                assert!(
                    last_handed.elapsed() < Duration::from_secs(60),
                    "the writer fell behind a stream of {paced} events a second"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let lag = last_handed.elapsed().as_secs_f64() * 1000.0;
            // One run read back from its first event, a page at a time.
            let (run, _) = &ids[0];
            let started = Instant::now();
            let mut after = 0;
            let mut n = 0;
            loop {
                let page = store.events(run, after, 2_000).await.unwrap();
                let Some((last, _)) = page.last() else { break };
                for (i, (seq, _)) in page.iter().enumerate() {
                    assert_eq!(*seq, after + 1 + i as u64, "out of order");
                }
                after = *last;
                n += page.len();
            }
            assert_eq!(
                n,
                events.div_ceil(runs).min(events),
                "a run's events are missing"
            );
            let read_rate = n as f64 / started.elapsed().as_secs_f64();
            (rate, read_rate, n, lag)
        });
        println!(
            "round {}: {:.0} events/s written, one run of {n} read back at {:.0} events/s; a stream of {paced} events/s written within {lag:.1} ms of the last",
            round + 1,
            rate,
            read_rate
        );
        lags.push(lag);
        written.push(rate);
        read.push(read_rate);
        per_run = n;
    }
    let (w50, wmin, wmax) = stats(written);
    let (r50, rmin, rmax) = stats(read);
    let (l50, lmin, lmax) = stats(lags);
    println!(
        "{}",
        serde_json::json!({
            "bench": "cluster_events",
            "events": events,
            "runs": runs,
            "rounds": rounds,
            "written_per_s": {"median": w50.round(), "min": wmin.round(), "max": wmax.round(), "target": 5000, "met": wmin >= 5000.0},
            "read_back_per_s": {"median": r50.round(), "min": rmin.round(), "max": rmax.round(), "events": per_run},
            "stream": {"per_s": paced, "seconds": 3, "lag_ms": {"median": l50, "min": lmin, "max": lmax}},
        })
    );
    assert!(
        wmin >= 5000.0,
        "writes below 5,000 events a second: {wmin:.0}"
    );
}
