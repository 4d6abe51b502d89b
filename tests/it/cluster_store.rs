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

/// A run's events, as the replica running it hands them to the store:
/// each stored once under its number (one handed again, as a write tried
/// again after a failure does, is not doubled), read back in order from
/// any number, and deleted once the run has ended and its keep is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_events_are_stored_by_number_read_in_order_and_deleted_after_the_run() {
    use pincer::cluster::RunEvent;
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let store = Store::connect(&postgres.url(), "events").await.unwrap();
    store.keep_ended_runs(Duration::from_millis(300));
    store.store_events();
    let sink = store.event_sink().expect("the writer runs");
    for run in ["ends", "goes-on"] {
        for seq in 1..=5u64 {
            sink(RunEvent::Told {
                run: run.to_string(),
                seq,
                event: format!("{{\"n\":{seq}}}"),
            });
        }
    }
    sink(RunEvent::Told {
        run: "ends".to_string(),
        seq: 3,
        event: "{\"n\":3}".to_string(),
    });
    let started = Instant::now();
    while postgres.psql("SELECT count(*) FROM pincer_run_events") != "10" {
        assert!(started.elapsed() < Duration::from_secs(20), "not stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let read = store.events("ends", 2, 2).await.unwrap();
    assert_eq!(
        read,
        vec![(3, "{\"n\":3}".to_string()), (4, "{\"n\":4}".to_string())]
    );
    sink(RunEvent::Ended {
        run: "ends".to_string(),
    });
    // Kept a while for a replica still catching up, then deleted; the
    // run going on keeps its events.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.events("ends", 0, 100).await.unwrap().len(), 5);
    while postgres.psql("SELECT count(*) FROM pincer_run_events WHERE run = 'ends'") != "0" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "an ended run's events were not deleted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.events("goes-on", 0, 100).await.unwrap().len(), 5);
}

/// A gone replica's sessions: those running, with a queued message or
/// used in the last week are taken over by the sweep; an older idle one
/// is left to the next message for it, which takes it over then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_replica_s_recent_sessions_are_swept_up_and_an_old_one_is_taken_on_its_next_message()
{
    use pincer::cluster::Placed;
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let store = Store::connect(&postgres.url(), "here").await.unwrap();
    postgres.psql(
        "INSERT INTO pincer_sessions (key, session_id, replica, running, updated_at) VALUES
         ('recent', 's1', 'gone', NULL, now() - interval '1 day'),
         ('running', 's2', 'gone', 'run-2', now() - interval '30 days'),
         ('queued', 's3', 'gone', NULL, now() - interval '30 days'),
         ('old', 's4', 'gone', NULL, now() - interval '30 days');
         INSERT INTO pincer_run_queue (run, key, message, queued_by) VALUES ('q1', 'queued', '{}', 'there')",
    );
    let mut swept: Vec<(String, Option<String>)> = store
        .orphans()
        .await
        .unwrap()
        .into_iter()
        .map(|o| (o.key, o.run))
        .collect();
    swept.sort();
    assert_eq!(
        swept,
        vec![
            ("queued".to_string(), None),
            ("recent".to_string(), None),
            ("running".to_string(), Some("run-2".to_string())),
        ]
    );
    assert_eq!(
        store.take("old").await.unwrap(),
        Placed::TakenOver {
            session: "s4".to_string(),
            from: "gone".to_string(),
            running: None,
        }
    );
    assert_eq!(
        postgres.psql("SELECT string_agg(replica, ',') FROM pincer_sessions"),
        "here,here,here,here"
    );
}

/// The store over TLS, checked as libpq's `sslmode` says, against a real
/// PostgreSQL that takes TLS connections only. Its certificate is for
/// `localhost`, signed by a test CA whose key is P-384, so the
/// certificate's signature hashes with SHA-384: the SCRAM exchange bound
/// to the connection (`channel_binding=require`) succeeds only when pincer
/// hashes the certificate as the server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_over_tls_checks_the_server_as_sslmode_says_and_binds_the_password_to_it() {
    use crate::support::bridge::TestCa;
    let ca = TestCa::signing_with("pincer store CA", &rcgen::PKCS_ECDSA_P384_SHA384);
    let stranger = TestCa::named("someone else's CA");
    let (tls, plain) = tokio::join!(
        tokio::task::spawn_blocking(move || {
            let postgres = Postgres::start_tls(&ca);
            (postgres, ca)
        }),
        tokio::task::spawn_blocking(Postgres::start)
    );
    let ((tls, ca), plain) = (tls.unwrap(), plain.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let roots = dir.path().join("ca.pem");
    std::fs::write(&roots, &ca.ca_pem).unwrap();
    let wrong_roots = dir.path().join("stranger.pem");
    std::fs::write(&wrong_roots, &stranger.ca_pem).unwrap();
    let port = tls.port();
    let url = |host: &str, options: &str| {
        format!("postgres://teller:teller-secret@{host}:{port}/pincer?{options}")
    };
    let connect = async |url: String| Store::connect(&url, "tls").await.map(|_| ());

    // Checked in full, and the password bound to the connection.
    let full = format!(
        "sslmode=verify-full&sslrootcert={}&channel_binding=require",
        roots.display()
    );
    let store = Store::connect(&url("localhost", &full), "tls")
        .await
        .unwrap();
    let encrypted = tls.psql(
        "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE usename = 'teller' AND ssl",
    );
    assert_ne!(encrypted, "0", "no TLS connection of teller's");
    // The schema is there: the store works over it.
    assert_eq!(
        tls.psql("SELECT string_agg(version::text, ',' ORDER BY version) FROM pincer_migrations"),
        "1,2,3,4,5,6"
    );
    drop(store);

    // The certificate is for `localhost`, not for the address.
    let error = connect(url("127.0.0.1", &full)).await.unwrap_err();
    assert!(error.contains("cannot reach the cluster store"), "{error}");
    assert!(error.to_lowercase().contains("not valid for"), "{error}");
    assert!(!error.contains("teller-secret"), "{error}");
    // verify-ca checks the chain only.
    let chain_only = format!("sslmode=verify-ca&sslrootcert={}", roots.display());
    connect(url("127.0.0.1", &chain_only)).await.unwrap();
    // Another CA's roots do not vouch for it, in either mode.
    for mode in ["verify-ca", "verify-full"] {
        let options = format!("sslmode={mode}&sslrootcert={}", wrong_roots.display());
        let error = connect(url("localhost", &options)).await.unwrap_err();
        assert!(error.contains("UnknownIssuer"), "{mode}: {error}");
    }
    // `require` encrypts without checking; so does the default, `prefer`,
    // with a server that offers TLS (this one refuses anything else).
    connect(url("127.0.0.1", "sslmode=require")).await.unwrap();
    connect(format!(
        "postgres://teller:teller-secret@127.0.0.1:{port}/pincer"
    ))
    .await
    .unwrap();
    // Over its Unix socket there is no TLS, whatever the mode (libpq's
    // rule): the store is reached.
    for mode in ["", "?sslmode=require"] {
        connect(format!("{}{mode}", tls.socket_url()))
            .await
            .unwrap();
    }
    // `disable` is refused by this server, which takes TLS only.
    let error = connect(url("127.0.0.1", "sslmode=disable"))
        .await
        .unwrap_err();
    assert!(error.contains("no encryption"), "{error}");

    // A server without TLS: `require` does not fall back to the clear.
    let plain_url = format!("{}?sslmode=require", plain.url());
    let error = connect(plain_url).await.unwrap_err();
    assert!(error.contains("cannot reach the cluster store"), "{error}");
    assert_eq!(
        plain.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'pincer_migrations'"),
        "0",
        "pincer reached the server in the clear"
    );
    // `prefer` does.
    connect(plain.url()).await.unwrap();
}

/// A deleted session's lines go, a line still on its way is not written,
/// its queued messages go, and a live replica's session is not deleted
/// by another replica (that one is asked to instead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_session_loses_its_lines_even_those_on_their_way_and_a_live_replica_s_is_kept()
{
    use pincer::cluster::Placed;
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let store = Store::connect(&postgres.url(), "here").await.unwrap();
    let other = Store::connect(&postgres.url(), "there").await.unwrap();
    store.store_lines();
    let sink = store.write_lines().expect("the writer runs");
    assert!(store.bind("mine", "s-mine").await.unwrap());
    assert!(other.bind("theirs", "s-theirs").await.unwrap());
    sink(
        "s-mine",
        vec!["{\"n\":1}".to_string(), "{\"n\":2}".to_string()],
    );
    sink("s-theirs", vec!["{\"n\":1}".to_string()]);
    let count = |session: &str| {
        format!("SELECT count(*) FROM pincer_session_lines WHERE session_id = '{session}'")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while postgres.psql(&count("s-mine")) != "2" || postgres.psql(&count("s-theirs")) != "1" {
        assert!(Instant::now() < deadline, "the lines were never written");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    postgres.psql("INSERT INTO pincer_run_queue (run, key, message, queued_by) VALUES ('q1', 'mine', '{}', 'there')");

    // Another live replica's session is not this one's to forget.
    assert_eq!(store.forget("theirs").await.unwrap(), None);
    assert_eq!(postgres.psql(&count("s-theirs")), "1");
    assert!(
        !store.rebind("theirs", "s-new").await.unwrap(),
        "a reset took a live replica's key"
    );
    // Its own is.
    assert_eq!(
        store.forget("mine").await.unwrap(),
        Some("s-mine".to_string())
    );
    assert_eq!(postgres.psql(&count("s-mine")), "0");
    assert_eq!(postgres.psql("SELECT count(*) FROM pincer_run_queue"), "0");
    assert_eq!(store.take("mine").await.unwrap(), Placed::Vacant);
    // A line written after the deletion (a run's last, racing it) is not
    // stored; another session's line after it is.
    sink("s-mine", vec!["{\"n\":3}".to_string()]);
    sink("s-theirs", vec!["{\"n\":2}".to_string()]);
    while postgres.psql(&count("s-theirs")) != "2" {
        assert!(
            Instant::now() < deadline,
            "the later line was never written"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(postgres.psql(&count("s-mine")), "0");
    // A reset gives its own key a new session.
    assert!(store.bind("reset", "s-old").await.unwrap());
    assert!(store.rebind("reset", "s-new").await.unwrap());
    assert_eq!(
        store.take("reset").await.unwrap(),
        Placed::Mine {
            session: "s-new".to_string()
        }
    );
}

/// The replica's requests share its connection: one that waits on a lock
/// another transaction holds (here a `psql` holding the sessions' table)
/// does not hold back the others, such as reading the replicas, and
/// finishes once the lock is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waiting_on_a_lock_does_not_hold_back_the_replica_s_other_requests() {
    use std::io::Write;
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let store = Store::connect(&postgres.url(), "here").await.unwrap();
    let mut holder = postgres.open_psql();
    let mut input = holder.stdin.take().unwrap();
    writeln!(
        input,
        "BEGIN; LOCK TABLE pincer_sessions IN ACCESS EXCLUSIVE MODE; SELECT 1;"
    )
    .unwrap();
    input.flush().unwrap();
    let held = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE c.relname = 'pincer_sessions' AND l.mode = 'AccessExclusiveLock' AND l.granted";
    let deadline = Instant::now() + Duration::from_secs(10);
    while postgres.psql(held) != "1" {
        assert!(Instant::now() < deadline, "psql never took the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waiting = tokio::spawn({
        let store = store.clone();
        async move { store.take("k").await }
    });
    // The take is on its way, and waits for the lock.
    let waits = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'";
    while postgres.psql(waits) != "1" {
        assert!(Instant::now() < deadline, "the take never waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    assert_eq!(store.others().await.unwrap(), Vec::<String>::new());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "reading the replicas waited {:?} behind the take",
        started.elapsed()
    );
    assert!(!waiting.is_finished());
    writeln!(input, "COMMIT;").unwrap();
    drop(input);
    let taken = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the take finished once the lock went")
        .unwrap()
        .unwrap();
    assert_eq!(taken, pincer::cluster::Placed::Vacant);
    let _ = holder.wait();
}
