//! The team gateway's store on a real PostgreSQL server (started by the
//! test): the transcripts' lines are written in batches fast enough for a
//! cluster's runs, each session's numbered in order.

use std::time::{Duration, Instant};

use pincer::cluster::Sessions;
use pincer::cluster::postgres::Store;

use crate::support::services::Postgres;

/// The floor for the session events a cluster stores.
const LINES_PER_SECOND: f64 = 5_000.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_lines_are_stored_at_five_thousand_a_second_numbered_per_session() {
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let store = Store::connect(&postgres.url(), "bench").await.unwrap();
    store.store_lines();
    let sink = store.write_lines().expect("the writer runs");
    const SESSIONS: usize = 100;
    const LINES: usize = 400;
    let total = SESSIONS * LINES;
    let started = Instant::now();
    // As runs write them: a line at a time, the sessions interleaved.
    for n in 1..=LINES {
        for s in 0..SESSIONS {
            sink(
                &format!("session-{s}"),
                vec![format!(
                    "{{\"type\":\"message\",\"n\":{n},\"text\":\"{}\"}}",
                    "x".repeat(200)
                )],
            );
        }
    }
    let count = "SELECT count(*) FROM pincer_session_lines";
    loop {
        let stored: usize = postgres.psql(count).parse().unwrap();
        if stored == total {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{stored} of {total} lines stored after a minute"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let rate = total as f64 / elapsed.as_secs_f64();
    eprintln!("stored {total} lines in {elapsed:?}: {rate:.0} lines/s");
    assert!(
        rate >= LINES_PER_SECOND,
        "{rate:.0} lines/s, under {LINES_PER_SECOND}"
    );
    // Each session's lines numbered 1..=LINES, in the order written.
    let wrong = postgres.psql(
        "SELECT count(*) FROM pincer_session_lines
         WHERE line NOT LIKE '%\"n\":' || seq || ',%'",
    );
    assert_eq!(wrong, "0");
    let numbered = postgres
        .psql("SELECT count(DISTINCT session_id), min(seq), max(seq) FROM pincer_session_lines");
    assert_eq!(numbered, format!("{SESSIONS}|1|{LINES}"));
    // A session's transcript reads back in order.
    let lines = store.lines("session-7").await.unwrap();
    assert_eq!(lines.len(), LINES);
    assert!(lines[LINES - 1].contains(&format!("\"n\":{LINES},")));
}
