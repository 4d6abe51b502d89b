//! The sessions' part of the store: which replica runs each session (a
//! lease that lasts while its replica renews its presence), the run it has
//! going, and every session's transcript, line by line.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::Client;

use super::Store;
use crate::cluster::{EventSink, LineSink, Orphan, Placed, Sessions};
use crate::config::cluster::redacted;

/// The transcript lines waiting for the writer, at most.
const LINES_QUEUE: usize = 262_144;
/// The most lines one write takes.
const BATCH: usize = 2_000;
/// The sessions whose next line number the writer keeps (it reads the
/// number again for one it forgot).
const KNOWN_SESSIONS: usize = 16_384;
/// How often a replica deletes the run queue's old rows.
const QUEUE_PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// How long the writer waits before it tries again after a failed write.
const RETRY: Duration = Duration::from_millis(500);

#[async_trait::async_trait]
impl Sessions for Store {
    async fn take(&self, key: &str) -> Result<Placed, String> {
        let replica = self.replica.clone();
        let lease = self.lease();
        let row = self
            .with_client(async |client| {
                client
                    .query_opt(
                        "WITH current AS (
                            SELECT s.session_id, s.replica, s.running,
                                   (s.replica = $2 OR r.seen_at IS NULL
                                    OR r.seen_at <= now() - make_interval(secs => $3::bigint)) AS free
                            FROM pincer_sessions s
                            LEFT JOIN pincer_replicas r ON r.name = s.replica
                            WHERE s.key = $1
                            FOR UPDATE OF s
                        ), moved AS (
                            UPDATE pincer_sessions s
                            SET replica = $2, running = NULL, updated_at = now()
                            FROM current c
                            WHERE s.key = $1 AND c.free
                            RETURNING s.key
                        )
                        SELECT session_id, replica, running, free FROM current",
                        &[&key, &replica, &lease],
                    )
                    .await
            })
            .await?;
        let Some(row) = row else {
            return Ok(Placed::Vacant);
        };
        let session: String = row.get(0);
        let held_by: String = row.get(1);
        let running: Option<String> = row.get(2);
        let free: bool = row.get(3);
        Ok(if !free {
            Placed::Elsewhere {
                session,
                replica: held_by,
            }
        } else if held_by == replica {
            Placed::Mine { session }
        } else {
            Placed::TakenOver {
                session,
                from: held_by,
                running,
            }
        })
    }

    async fn bind(&self, key: &str, session: &str) -> Result<bool, String> {
        let replica = self.replica.clone();
        let written = self
            .with_client(async |client| {
                client
                    .execute(
                        "INSERT INTO pincer_sessions (key, session_id, replica)
                         VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING",
                        &[&key, &session, &replica],
                    )
                    .await
            })
            .await?;
        Ok(written == 1)
    }

    async fn rebind(&self, key: &str, session: &str) -> Result<bool, String> {
        let (replica, lease) = (self.replica.clone(), self.lease());
        let written = self
            .with_client(async |client| {
                client
                    .execute(
                        "INSERT INTO pincer_sessions (key, session_id, replica)
                         VALUES ($1, $2, $3)
                         ON CONFLICT (key) DO UPDATE
                         SET session_id = EXCLUDED.session_id, replica = EXCLUDED.replica,
                             running = NULL, updated_at = now()
                         WHERE pincer_sessions.replica = $3 OR NOT EXISTS (
                             SELECT 1 FROM pincer_replicas r
                             WHERE r.name = pincer_sessions.replica
                               AND r.seen_at > now() - make_interval(secs => $4::bigint))",
                        &[&key, &session, &replica, &lease],
                    )
                    .await
            })
            .await?;
        Ok(written == 1)
    }

    async fn forget(&self, key: &str) -> Result<Option<String>, String> {
        let (replica, lease) = (self.replica.clone(), self.lease());
        let row = self
            .with_client(async |client| {
                client
                    .query_opt(
                        "WITH gone AS (
                             DELETE FROM pincer_sessions s
                             WHERE s.key = $1 AND (s.replica = $2 OR NOT EXISTS (
                                 SELECT 1 FROM pincer_replicas r
                                 WHERE r.name = s.replica
                                   AND r.seen_at > now() - make_interval(secs => $3::bigint)))
                             RETURNING s.session_id
                         ), marked AS (
                             INSERT INTO pincer_deleted_sessions (session_id)
                             SELECT session_id FROM gone ON CONFLICT DO NOTHING
                         ), lines AS (
                             DELETE FROM pincer_session_lines l USING gone
                             WHERE l.session_id = gone.session_id
                         ), queued AS (
                             DELETE FROM pincer_run_queue q
                             WHERE q.key = $1 AND q.claimed_by IS NULL
                               AND EXISTS (SELECT 1 FROM gone)
                         )
                         SELECT session_id FROM gone",
                        &[&key, &replica, &lease],
                    )
                    .await
            })
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    async fn locate(&self, key: &str) -> Result<Option<(String, String, bool)>, String> {
        let lease = self.lease();
        let row = self
            .with_client(async |client| {
                client
                    .query_opt(
                        "SELECT s.session_id, s.replica,
                                coalesce(r.seen_at > now() - make_interval(secs => $2::bigint), false)
                         FROM pincer_sessions s
                         LEFT JOIN pincer_replicas r ON r.name = s.replica
                         WHERE s.key = $1",
                        &[&key, &lease],
                    )
                    .await
            })
            .await?;
        Ok(row.map(|row| (row.get(0), row.get(1), row.get(2))))
    }

    async fn others(&self) -> Result<Vec<String>, String> {
        let (replica, lease) = (self.replica.clone(), self.lease());
        let rows = self
            .with_client(async |client| {
                client
                    .query(
                        "SELECT name FROM pincer_replicas
                         WHERE name <> $1 AND seen_at > now() - make_interval(secs => $2::bigint)
                         ORDER BY name",
                        &[&replica, &lease],
                    )
                    .await
            })
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn write_events(&self) -> Option<EventSink> {
        self.event_sink()
    }

    async fn events(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, String> {
        self.run_events(run, after, limit).await
    }

    async fn enqueue(&self, run: &str, key: &str, message: &str) -> Result<bool, String> {
        let replica = self.replica.clone();
        let written = self
            .with_client(async |client| {
                client
                    .execute(
                        "INSERT INTO pincer_run_queue (run, key, message, queued_by)
                         VALUES ($1, $2, $3, $4) ON CONFLICT (run) DO NOTHING",
                        &[&run, &key, &message, &replica],
                    )
                    .await
            })
            .await?;
        Ok(written == 1)
    }

    async fn claim(&self, run: &str) -> Result<Option<(String, String)>, String> {
        let replica = self.replica.clone();
        let row = self
            .with_client(async |client| {
                client
                    .query_opt(
                        "UPDATE pincer_run_queue q SET claimed_by = $2, claimed_at = now()
                         FROM (SELECT run FROM pincer_run_queue
                               WHERE run = $1 AND claimed_by IS NULL
                               FOR UPDATE SKIP LOCKED) waiting
                         WHERE q.run = waiting.run
                         RETURNING q.key, q.message",
                        &[&run, &replica],
                    )
                    .await
            })
            .await?;
        Ok(row.map(|row| (row.get(0), row.get(1))))
    }

    async fn claim_waiting(&self) -> Result<Vec<(String, String, String)>, String> {
        let replica = self.replica.clone();
        // The old rows go once an hour, not every sweep.
        let prune = {
            let mut pruned = self.queue_pruned.lock();
            let due = pruned.is_none_or(|at| at.elapsed() >= QUEUE_PRUNE_EVERY);
            if due {
                *pruned = Some(std::time::Instant::now());
            }
            due
        };
        let rows = self
            .with_client(async |client| {
                let rows = client
                    .query(
                        "UPDATE pincer_run_queue q SET claimed_by = $1, claimed_at = now()
                         FROM (SELECT w.run FROM pincer_run_queue w
                               JOIN pincer_sessions s ON s.key = w.key
                               WHERE w.claimed_by IS NULL AND s.replica = $1
                               ORDER BY w.queued_at
                               LIMIT 100
                               FOR UPDATE OF w SKIP LOCKED) waiting
                         WHERE q.run = waiting.run
                         RETURNING q.run, q.key, q.message, q.queued_at",
                        &[&replica],
                    )
                    .await?;
                if prune {
                    client
                        .execute(
                            "DELETE FROM pincer_run_queue
                             WHERE (claimed_at < now() - interval '1 day')
                                OR (claimed_by IS NULL AND queued_at < now() - interval '7 days')",
                            &[],
                        )
                        .await?;
                    // Lines that raced their session's deletion, and the
                    // deletions a day old.
                    client
                        .execute(
                            "DELETE FROM pincer_session_lines l USING pincer_deleted_sessions d
                             WHERE l.session_id = d.session_id",
                            &[],
                        )
                        .await?;
                    client
                        .execute(
                            "DELETE FROM pincer_deleted_sessions
                             WHERE deleted_at < now() - interval '1 day'",
                            &[],
                        )
                        .await?;
                }
                Ok(rows)
            })
            .await?;
        let mut claimed: Vec<(std::time::SystemTime, (String, String, String))> = rows
            .iter()
            .map(|row| (row.get(3), (row.get(0), row.get(1), row.get(2))))
            .collect();
        claimed.sort_by_key(|(at, _)| *at);
        Ok(claimed.into_iter().map(|(_, run)| run).collect())
    }

    async fn runs_elsewhere(&self) -> Result<Vec<String>, String> {
        let (replica, lease) = (self.replica.clone(), self.lease());
        let rows = self
            .with_client(async |client| {
                client
                    .query(
                        "SELECT s.running FROM pincer_sessions s
                         JOIN pincer_replicas r ON r.name = s.replica
                         WHERE s.running IS NOT NULL AND s.replica <> $1
                           AND r.seen_at > now() - make_interval(secs => $2::bigint)
                         ORDER BY s.updated_at DESC LIMIT $3",
                        &[&replica, &lease, &super::events::CATCH_UP_RUNS],
                    )
                    .await
            })
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn lines(&self, session: &str) -> Result<Vec<String>, String> {
        let rows = self
            .with_client(async |client| {
                client
                    .query(
                        "SELECT line FROM pincer_session_lines WHERE session_id = $1 ORDER BY seq",
                        &[&session],
                    )
                    .await
            })
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn running(&self, session: &str, run: Option<&str>) -> Result<(), String> {
        let replica = self.replica.clone();
        self.with_client(async |client| {
            client
                .execute(
                    "UPDATE pincer_sessions SET running = $2, updated_at = now()
                     WHERE session_id = $1 AND replica = $3",
                    &[&session, &run, &replica],
                )
                .await
        })
        .await
        .map(drop)
    }

    async fn orphans(&self) -> Result<Vec<Orphan>, String> {
        let replica = self.replica.clone();
        let lease = self.lease();
        let rows = self
            .with_client(async |client| {
                client
                    .query(
                        "UPDATE pincer_sessions s
                         SET replica = $1, running = NULL, updated_at = now()
                         FROM (
                            SELECT o.key, o.running, o.replica
                            FROM pincer_sessions o
                            LEFT JOIN pincer_replicas r ON r.name = o.replica
                            WHERE o.replica <> $1
                              AND (o.running IS NOT NULL
                                   OR o.updated_at > now() - interval '7 days'
                                   OR EXISTS (SELECT 1 FROM pincer_run_queue q
                                              WHERE q.key = o.key AND q.claimed_by IS NULL))
                              AND (r.seen_at IS NULL
                                   OR r.seen_at <= now() - make_interval(secs => $2::bigint))
                            ORDER BY o.running IS NULL, o.updated_at DESC
                            LIMIT 100
                            FOR UPDATE OF o SKIP LOCKED
                         ) gone
                         WHERE s.key = gone.key
                         RETURNING s.key, s.session_id, gone.running, gone.replica",
                        &[&replica, &lease],
                    )
                    .await
            })
            .await?;
        Ok(rows
            .iter()
            .map(|row| Orphan {
                key: row.get(0),
                session: row.get(1),
                run: row.get(2),
                from: row.get(3),
            })
            .collect())
    }

    fn write_lines(&self) -> Option<LineSink> {
        let tx = self.lines.get()?.clone();
        Some(Arc::new(move |session: &str, lines: Vec<String>| {
            for line in lines {
                if tx.try_send((session.to_string(), line)).is_err() {
                    tracing::warn!(
                        session,
                        "the cluster store is not keeping up with the transcripts; a line was not stored"
                    );
                    return;
                }
            }
        }))
    }
}

/// A session as the store lists it (`pincer sessions list`).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    pub key: String,
    pub session_id: String,
    pub replica: String,
    /// The run it has going, if any.
    pub running: Option<String>,
    /// Milliseconds since the epoch.
    pub updated_at: i64,
    /// Its transcript's first line (its header), if stored.
    #[serde(skip)]
    pub header: Option<String>,
}

impl Store {
    /// The sessions of the cluster, the most recently used first (at most
    /// `limit`).
    pub async fn listed(&self, limit: i64) -> Result<Vec<Listed>, String> {
        let rows = self
            .with_client(async |client| {
                client
                    .query(
                        "SELECT s.key, s.session_id, s.replica, s.running,
                                (extract(epoch FROM s.updated_at) * 1000)::bigint,
                                (SELECT l.line FROM pincer_session_lines l
                                 WHERE l.session_id = s.session_id AND l.seq = 1)
                         FROM pincer_sessions s ORDER BY s.updated_at DESC, s.key LIMIT $1",
                        &[&limit],
                    )
                    .await
            })
            .await?;
        Ok(rows
            .iter()
            .map(|row| Listed {
                key: row.get(0),
                session_id: row.get(1),
                replica: row.get(2),
                running: row.get(3),
                updated_at: row.get(4),
                header: row.get(5),
            })
            .collect())
    }

    /// The lease in seconds, as the queries take it.
    pub(super) fn lease(&self) -> i64 {
        self.lease_seconds
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts the task that stores the transcripts' lines, on a
    /// connection of its own, many lines a write.
    pub fn store_lines(self: &Arc<Self>) {
        let (tx, rx) = mpsc::channel(LINES_QUEUE);
        if self.lines.set(tx).is_err() {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move { store.write_lines_from(rx).await });
    }

    async fn write_lines_from(&self, mut rx: mpsc::Receiver<(String, String)>) {
        let mut client: Option<Client> = None;
        let mut next: HashMap<String, i64> = HashMap::new();
        let mut batch: Vec<(String, String)> = Vec::with_capacity(BATCH);
        loop {
            if batch.is_empty() {
                let Some(first) = rx.recv().await else { return };
                batch.push(first);
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok(line) => batch.push(line),
                        Err(_) => break,
                    }
                }
            }
            if client.as_ref().is_none_or(Client::is_closed) {
                match self.open().await {
                    Ok(opened) => client = Some(opened),
                    Err(e) => {
                        tracing::warn!("cluster: cannot store transcript lines: {e}");
                        tokio::time::sleep(RETRY).await;
                        continue;
                    }
                }
            }
            let Some(connected) = client.as_ref() else {
                continue;
            };
            if next.len() > KNOWN_SESSIONS {
                next.clear();
            }
            match tokio::time::timeout(self.timeout, write_batch(connected, &mut next, &batch))
                .await
            {
                Ok(Ok(())) => batch.clear(),
                Ok(Err(e)) => {
                    tracing::warn!(
                        "cluster store {}: cannot store transcript lines: {e}",
                        redacted(&self.url)
                    );
                    // The numbers are read again: the failed write may
                    // have been half done.
                    next.clear();
                    client = None;
                    tokio::time::sleep(RETRY).await;
                }
                Err(_) => {
                    next.clear();
                    client = None;
                }
            }
        }
    }
}

/// Stores `batch` in one statement, numbering each session's lines on
/// from the last it has.
async fn write_batch(
    client: &Client,
    next: &mut HashMap<String, i64>,
    batch: &[(String, String)],
) -> Result<(), tokio_postgres::Error> {
    let mut numbered: HashMap<String, i64> = HashMap::new();
    let mut sessions = Vec::with_capacity(batch.len());
    let mut seqs = Vec::with_capacity(batch.len());
    let mut lines = Vec::with_capacity(batch.len());
    for (session, line) in batch {
        let seq = match numbered
            .get(session)
            .copied()
            .or_else(|| next.get(session).copied())
        {
            Some(seq) => seq,
            None => {
                let row = client
                    .query_one(
                        "SELECT coalesce(max(seq), 0) + 1 FROM pincer_session_lines WHERE session_id = $1",
                        &[session],
                    )
                    .await?;
                row.get(0)
            }
        };
        numbered.insert(session.clone(), seq + 1);
        sessions.push(session.as_str());
        seqs.push(seq);
        lines.push(line.as_str());
    }
    client
        .execute(
            "INSERT INTO pincer_session_lines (session_id, seq, line)
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]) AS t(session_id, seq, line)
             WHERE NOT EXISTS (
                 SELECT 1 FROM pincer_deleted_sessions d WHERE d.session_id = t.session_id)",
            &[&sessions, &seqs, &lines],
        )
        .await?;
    next.extend(numbered);
    Ok(())
}
