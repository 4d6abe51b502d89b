//! The runs' events in the store: what the replica running a session
//! tells the bus of its run, each numbered from 1 per run, written many a
//! statement on a connection of their own, so that a replica that starts
//! while the run goes on, or missed some of its events, reads them before
//! it follows the bus.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_postgres::Client;

use super::Store;
use crate::cluster::{EventSink, RunEvent};
use crate::config::cluster::redacted;

/// The runs going on elsewhere a replica that joins catches up with, at
/// most (the most recently started first).
pub(super) const CATCH_UP_RUNS: i64 = 1_000;
/// The events waiting for the writer, at most: beyond them an event is
/// dropped (a replica that misses it waits for it a moment, then goes on
/// without it).
const EVENTS_QUEUE: usize = 262_144;
/// The most events one statement writes.
const BATCH: usize = 4_000;
/// How long a run's events stay after it ended, for a replica catching up
/// with it ([`Store::keep_ended_runs`] changes it).
pub(super) const KEEP_ENDED: Duration = Duration::from_secs(60);
/// How often the writer deletes what is due without events to write.
const PRUNE_TICK: Duration = Duration::from_secs(5);
/// How often events older than a day (a run whose replica died before it
/// ended, or whose end was not heard) are deleted.
const PRUNE_OLD_EVERY: Duration = Duration::from_secs(3600);
/// The ended runs waiting for their events' deletion, at most: beyond
/// them the oldest are deleted at once.
const MAX_ENDED: usize = 65_536;
/// How long the writer waits before it tries again after a failure.
const RETRY: Duration = Duration::from_millis(500);

impl Store {
    /// Starts the task that stores the runs' events ([`Self::event_sink`]).
    pub fn store_events(self: &Arc<Self>) {
        let (tx, rx) = mpsc::channel(EVENTS_QUEUE);
        if self.events.set(tx).is_err() {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move { store.write_events_from(rx).await });
    }

    /// How long a run's events stay after it ended (a minute unless
    /// changed; tests shorten it).
    pub fn keep_ended_runs(&self, keep: Duration) {
        self.keep_ended.store(
            u64::try_from(keep.as_millis()).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    fn kept_ended(&self) -> Duration {
        Duration::from_millis(self.keep_ended.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Where the runs' events go, once their writer runs.
    pub fn event_sink(&self) -> Option<EventSink> {
        let tx = self.events.get()?.clone();
        Some(Arc::new(move |event: RunEvent| {
            if tx.try_send(event).is_err() {
                tracing::warn!(
                    "the cluster store is not keeping up with the runs' events; one was not stored"
                );
            }
        }))
    }

    /// The events of `run` after `after`, in order, at most `limit`.
    pub(super) async fn run_events(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, String> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .with_client(async |client| {
                client
                    .query(
                        "SELECT seq, event FROM pincer_run_events
                         WHERE run = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                        &[&run, &after, &limit],
                    )
                    .await
            })
            .await?;
        Ok(rows
            .iter()
            .map(|row| (u64::try_from(row.get::<_, i64>(0)).unwrap_or(0), row.get(1)))
            .collect())
    }

    async fn write_events_from(&self, mut rx: mpsc::Receiver<RunEvent>) {
        let mut client: Option<Client> = None;
        let mut batch = Batch::default();
        let mut ended: VecDeque<(Instant, String)> = VecDeque::new();
        let mut pruned_old: Option<Instant> = None;
        loop {
            let keep = self.kept_ended();
            if batch.is_empty() {
                match tokio::time::timeout(PRUNE_TICK.min(keep), rx.recv()).await {
                    Ok(Some(event)) => batch.take(event, &mut ended),
                    Ok(None) => return,
                    Err(_) => {}
                }
                while batch.runs.len() < BATCH {
                    match rx.try_recv() {
                        Ok(event) => batch.take(event, &mut ended),
                        Err(_) => break,
                    }
                }
            }
            let now = Instant::now();
            let due: Vec<String> = ended
                .iter()
                .take_while(|(at, _)| now.duration_since(*at) >= keep || ended.len() > MAX_ENDED)
                .map(|(_, run)| run.clone())
                .collect();
            let old_due = pruned_old.is_none_or(|at| now.duration_since(at) >= PRUNE_OLD_EVERY);
            if batch.is_empty() && due.is_empty() && !old_due {
                continue;
            }
            if client.as_ref().is_none_or(Client::is_closed) {
                match self.open().await {
                    Ok(opened) => client = Some(opened),
                    Err(e) => {
                        tracing::warn!("cluster: cannot store the runs' events: {e}");
                        tokio::time::sleep(RETRY).await;
                        continue;
                    }
                }
            }
            let Some(connected) = client.as_ref() else {
                continue;
            };
            let work = async {
                if !batch.is_empty() {
                    batch.write(connected).await?;
                }
                if !due.is_empty() {
                    connected
                        .execute("DELETE FROM pincer_run_events WHERE run = ANY($1)", &[&due])
                        .await?;
                }
                if old_due {
                    connected
                        .execute(
                            "DELETE FROM pincer_run_events WHERE at < now() - interval '1 day'",
                            &[],
                        )
                        .await?;
                }
                Ok::<(), tokio_postgres::Error>(())
            };
            match tokio::time::timeout(self.timeout, work).await {
                Ok(Ok(())) => {
                    batch.clear();
                    ended.drain(..due.len());
                    if old_due {
                        pruned_old = Some(now);
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(
                        "cluster store {}: cannot store the runs' events: {e}",
                        redacted(&self.url)
                    );
                    client = None;
                    tokio::time::sleep(RETRY).await;
                }
                Err(_) => client = None,
            }
        }
    }
}

/// The events one statement writes, as its columns.
#[derive(Default)]
struct Batch {
    runs: Vec<String>,
    seqs: Vec<i64>,
    events: Vec<String>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    fn take(&mut self, event: RunEvent, ended: &mut VecDeque<(Instant, String)>) {
        match event {
            RunEvent::Told { run, seq, event } => {
                self.runs.push(run);
                self.seqs.push(i64::try_from(seq).unwrap_or(i64::MAX));
                self.events.push(event);
            }
            RunEvent::Ended { run } => ended.push_back((Instant::now(), run)),
        }
    }

    fn clear(&mut self) {
        self.runs.clear();
        self.seqs.clear();
        self.events.clear();
    }

    /// Writes the batch in one statement. An event already there (a
    /// write that failed after it was done, tried again) is left as it is.
    async fn write(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        client
            .execute(
                "INSERT INTO pincer_run_events (run, seq, event)
                 SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])
                 ON CONFLICT DO NOTHING",
                &[&self.runs, &self.seqs, &self.events],
            )
            .await
            .map(|_| ())
    }
}
