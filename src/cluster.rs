//! The team gateway: several `pincer gateway` processes ("replicas") that
//! share a PostgreSQL database (`[cluster] store`). A single gateway
//! needs none of this: without `[cluster]`, [`Alone`] answers every
//! question as the one process there is.
//!
//! What the replicas share goes through the seams here, so that the
//! gateway is the same code alone and in a cluster:
//! - [`Claims`]: work that must happen once across the cluster (a cron
//!   job's run at its time, the heartbeat in its interval). The database
//!   decides who has it, by a unique key: no consensus of pincer's own.
//! - [`Claims::hold`] and [`Claims::first`]: a chat channel's receiving
//!   runs on one replica at a time (a lease), and what it receives is
//!   taken once across the cluster, whichever replica it reached.
//! - [`bus::Bus`]: the NATS server (`[cluster] bus`) that carries what
//!   the sessions of each replica do to the others, live, and the
//!   requests one replica makes of the replica running a session.
//!
//! Credentials stay in each replica's own config and environment: none is
//! ever written to the store.

pub mod bus;
pub mod postgres;

use std::sync::Arc;

/// Work that must happen once across the cluster.
#[async_trait::async_trait]
pub trait Claims: Send + Sync {
    /// Claims run `slot_ms` (its scheduled time, or its interval's start,
    /// in ms since the epoch) of the scheduled work `name`: `Ok(true)` if
    /// this replica is to do it, `Ok(false)` if another has it, `Err` if
    /// the store cannot say (then nobody should do it twice: the caller
    /// skips it).
    async fn claim(&self, name: &str, slot_ms: i64) -> Result<bool, String>;

    /// The latest run of `name` any replica claimed (`None`: none, or a
    /// gateway alone, which keeps its own record).
    async fn last(&self, name: &str) -> Result<Option<i64>, String>;

    /// Holds the lease `name` (a channel's receiving, which one replica
    /// does at a time): `Ok(true)` while it is this replica's. It stays
    /// this replica's while this replica renews its presence, and is the
    /// next replica's to take once that ran out.
    async fn hold(&self, name: &str) -> Result<bool, String>;

    /// Something a channel received, by the platform's id of it: `Ok(true)`
    /// if no replica took it before, so that one delivered twice is
    /// answered once.
    async fn first(&self, id: &str) -> Result<bool, String>;
}

/// The sessions of a cluster: each runs on one replica at a time, under
/// a lease that lasts while that replica renews its presence; the store
/// keeps every session's transcript, so that another replica can take a
/// session over when its replica is gone.
#[async_trait::async_trait]
pub trait Sessions: Send + Sync {
    /// Takes the session `key` names for this replica, if no live replica
    /// has it.
    async fn take(&self, key: &str) -> Result<Placed, String>;
    /// Gives the new session `session` to `key`, on this replica: `false`
    /// if another replica gave the key one first.
    async fn bind(&self, key: &str, session: &str) -> Result<bool, String>;
    /// Gives `key` the new session `session` on this replica in place of
    /// the one it named (a reset), when this replica has the key or its
    /// replica is gone: `false` when a live replica has it.
    async fn rebind(&self, key: &str, session: &str) -> Result<bool, String>;
    /// Forgets the session `key` names, when this replica has it or its
    /// replica is gone: its lines are deleted, and lines still on their
    /// way are not written, nor the key's queued messages run. The
    /// session forgotten, or `None` when the store names none (or a live
    /// replica has it).
    async fn forget(&self, key: &str) -> Result<Option<String>, String>;
    /// The session `key` names, its replica and whether that replica is
    /// alive.
    async fn locate(&self, key: &str) -> Result<Option<(String, String, bool)>, String>;
    /// The session's transcript, line by line.
    async fn lines(&self, session: &str) -> Result<Vec<String>, String>;
    /// The run this replica has going in `session` (`None`: none now).
    async fn running(&self, session: &str, run: Option<&str>) -> Result<(), String>;
    /// Takes over the sessions whose replica is gone, those running,
    /// with queued messages or used in the last week (at most a hundred a
    /// call: those whose run was going first, then the most recently
    /// used); older ones are taken over by the next message for them.
    async fn orphans(&self) -> Result<Vec<Orphan>, String>;
    /// Where the transcripts' lines go: `(session, lines)`, queued.
    fn write_lines(&self) -> Option<LineSink>;
    /// The other replicas that are alive (renewed their presence within
    /// the lease).
    async fn others(&self) -> Result<Vec<String>, String>;
    /// The sink that stores the runs' events this replica tells, once its
    /// writer runs.
    fn write_events(&self) -> Option<EventSink>;
    /// The events of `run` after `after`, in order, at most `limit`:
    /// `(seq, event)`, the event as it was told on the bus.
    async fn events(
        &self,
        run: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, String>;
    /// The runs going on the other live replicas.
    async fn runs_elsewhere(&self) -> Result<Vec<String>, String>;
    /// Queues `message` (opaque to the store) as run `run` of the session
    /// `key` names, for the replica that runs it to claim. False when a
    /// run with that id was queued already.
    async fn enqueue(&self, run: &str, key: &str, message: &str) -> Result<bool, String>;
    /// Claims the queued run `run` for this replica: its key and message,
    /// or `None` when another claim took it (or it was never queued).
    async fn claim(&self, run: &str) -> Result<Option<(String, String)>, String>;
    /// Claims the queued runs of the sessions this replica holds, oldest
    /// first: `(run, key, message)`.
    async fn claim_waiting(&self) -> Result<Vec<(String, String, String)>, String>;
}

/// What the replica running a session hands the store of its runs'
/// events ([`Sessions::write_events`]).
#[derive(Clone, Debug)]
pub enum RunEvent {
    /// The run's `seq`th event, as told on the bus.
    Told {
        run: String,
        seq: u64,
        event: String,
    },
    /// The run ended: its events are kept a little longer, for a replica
    /// still catching up, then deleted.
    Ended { run: String },
}

/// Where [`RunEvent`]s go; never waits.
pub type EventSink = Arc<dyn Fn(RunEvent) + Send + Sync>;

/// Where a session is, as [`Sessions::take`] found it.
#[derive(Clone, Debug, PartialEq)]
pub enum Placed {
    /// The key names no session yet.
    Vacant,
    /// This replica has it already.
    Mine { session: String },
    /// This replica took it from `from`, which is gone; `running` is the
    /// run `from` had going, interrupted.
    TakenOver {
        session: String,
        from: String,
        running: Option<String>,
    },
    /// A live replica has it.
    Elsewhere { session: String, replica: String },
}

/// A session taken over from a replica that went while it ran `run`.
#[derive(Clone, Debug, PartialEq)]
pub struct Orphan {
    pub key: String,
    pub session: String,
    pub run: Option<String>,
    pub from: String,
}

/// Where the transcripts written in this process are copied to (the
/// cluster's store), once set.
static TRANSCRIPTS: std::sync::OnceLock<LineSink> = std::sync::OnceLock::new();

/// Sets where [`transcript_written`] hands the lines (unit tests, whose
/// process has no store).
#[cfg(test)]
pub(crate) fn hand_transcripts_to(sink: LineSink) {
    let _ = TRANSCRIPTS.set(sink);
}

/// Takes a transcript's lines, `(session, lines)`, for the store.
pub type LineSink = Arc<dyn Fn(&str, Vec<String>) + Send + Sync>;

/// A transcript at `path` was written `bytes` (whole lines): in a cluster
/// they are stored too, under the session's id (the file's name).
pub fn transcript_written(path: &std::path::Path, bytes: &[u8]) {
    let Some(sink) = TRANSCRIPTS.get() else {
        return;
    };
    let Some(session) = path.file_stem().and_then(|s| s.to_str()) else {
        return;
    };
    let lines: Vec<String> = bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| String::from_utf8_lossy(line).into_owned())
        .collect();
    if !lines.is_empty() {
        sink(session, lines);
    }
}

/// One gateway on its own: everything is its to do.
pub struct Alone;

#[async_trait::async_trait]
impl Claims for Alone {
    async fn claim(&self, _name: &str, _slot_ms: i64) -> Result<bool, String> {
        Ok(true)
    }

    async fn last(&self, _name: &str) -> Result<Option<i64>, String> {
        Ok(None)
    }

    async fn hold(&self, _name: &str) -> Result<bool, String> {
        Ok(true)
    }

    async fn first(&self, _id: &str) -> Result<bool, String> {
        // Each channel keeps its own record of what it took.
        Ok(true)
    }
}

/// What this gateway shares with the other replicas.
pub struct Cluster {
    pub claims: Arc<dyn Claims>,
    /// The sessions shared through the store (`None`: a gateway alone).
    pub sessions: Option<Arc<dyn Sessions>>,
    /// This replica's name (empty for a gateway alone).
    pub replica: String,
    /// How long its claims last without being renewed.
    pub lease: std::time::Duration,
    /// The bus to the other replicas (`[cluster] bus`), if any.
    pub bus: Option<Arc<bus::Bus>>,
    /// `replica `NAME` on store URL` (the URL without its password), or
    /// `None` for a gateway alone.
    pub joined: Option<String>,
}

/// How long a replica waits for the bus when it starts.
const BUS_JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The cluster this gateway belongs to, from `[cluster]` (`--store` and
/// `--bus` override its `store` and `bus`): connected, with the store's
/// schema brought up to date, or alone when no store is configured. A bus
/// without a store is refused: the store is what makes replicas one
/// cluster (who runs what), the bus only carries what happens.
pub async fn join(
    config: &crate::config::cluster::ClusterConfig,
    store: Option<&str>,
    bus: Option<&str>,
) -> Result<Cluster, String> {
    let bus_url = bus.or(config.bus.as_deref());
    let Some(url) = store.or(config.store.as_deref()) else {
        if bus_url.is_some() {
            return Err(
                "[cluster] bus needs [cluster] store too: the replicas share their sessions' state in the store"
                    .to_string(),
            );
        }
        return Ok(Cluster {
            claims: Arc::new(Alone),
            sessions: None,
            replica: String::new(),
            lease: std::time::Duration::from_secs(config.lease_seconds()),
            bus: None,
            joined: None,
        });
    };
    let replica = config.replica.clone().unwrap_or_else(default_replica);
    let store = postgres::Store::connect(url, &replica).await?;
    store.set_lease(config.lease_seconds());
    store.keep_alive(std::time::Duration::from_secs(config.lease_seconds()).div_f32(3.0));
    store.store_lines();
    store.store_events();
    if let Some(sink) = store.write_lines() {
        let _ = TRANSCRIPTS.set(sink);
    }
    let mut joined = format!(
        "replica `{replica}` on store {}",
        crate::config::cluster::redacted(url)
    );
    let bus = match bus_url {
        Some(bus_url) => {
            let bus = bus::Bus::connect(
                bus_url,
                &replica,
                config.bus_ca.as_deref(),
                BUS_JOIN_TIMEOUT,
            )
            .await?;
            joined.push_str(&format!(
                " and bus {}",
                crate::config::cluster::redacted(bus_url)
            ));
            Some(Arc::new(bus))
        }
        None => None,
    };
    Ok(Cluster {
        claims: store.clone(),
        sessions: Some(store),
        replica,
        lease: std::time::Duration::from_secs(config.lease_seconds()),
        bus,
        joined: Some(joined),
    })
}

/// A replica's name when the config gives none: the machine and the
/// process, which no other running replica has.
fn default_replica() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}:{}", std::process::id())
}
