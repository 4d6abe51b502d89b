//! The cluster's store on PostgreSQL: the connection, the schema (the
//! migrations in `src/cluster/migrations`, applied at start, one replica
//! at a time), and the claims.

use std::sync::Arc;

use tokio::sync::Mutex;
use tokio_postgres::Client;

use crate::config::cluster::redacted;

mod events;
mod sessions;
mod tls;

pub use sessions::Listed;

/// The schema's versions, oldest first: each applied once, in order.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "schedule claims",
        include_str!("migrations/0001_schedule_claims.sql"),
    ),
    (2, "sessions", include_str!("migrations/0002_sessions.sql")),
    (3, "channels", include_str!("migrations/0003_channels.sql")),
    (
        4,
        "run events",
        include_str!("migrations/0004_run_events.sql"),
    ),
    (
        5,
        "run queue",
        include_str!("migrations/0005_run_queue.sql"),
    ),
    (
        6,
        "deleted sessions",
        include_str!("migrations/0006_deleted_sessions.sql"),
    ),
];

/// The advisory lock replicas take while they bring the schema up to
/// date, so that two starting at once do not both apply a migration.
const MIGRATION_LOCK: i64 = 0x7069_6e63_6572; // "pincer"

pub struct Store {
    url: String,
    replica: String,
    /// [`STORE_TIMEOUT`], shorter in tests.
    timeout: std::time::Duration,
    /// The connections, each made when first needed and again after it
    /// was lost. A request takes one that is free: one that waits on a
    /// lock in the database (PostgreSQL runs a connection's requests one
    /// after another) does not hold back the others, such as the renewal
    /// of this replica's presence.
    clients: Vec<Mutex<Option<Client>>>,
    /// Where a request waits when every connection is busy.
    next_client: std::sync::atomic::AtomicUsize,
    /// How long a replica's claims last without being renewed, in seconds.
    lease_seconds: std::sync::atomic::AtomicI64,
    /// The transcripts' lines on their way to the store, once
    /// [`Store::store_lines`] started their writer.
    lines: std::sync::OnceLock<tokio::sync::mpsc::Sender<(String, String)>>,
    /// The runs' events on their way to the store, once
    /// [`Store::store_events`] started their writer.
    events: std::sync::OnceLock<tokio::sync::mpsc::Sender<crate::cluster::RunEvent>>,
    /// How long an ended run's events stay, in milliseconds.
    keep_ended: std::sync::atomic::AtomicU64,
    /// When this replica last deleted the run queue's old rows.
    queue_pruned: parking_lot::Mutex<Option<std::time::Instant>>,
}

/// What `pincer cluster status` shows: each replica that ever joined, and
/// the latest scheduled runs claimed.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub replicas: Vec<Replica>,
    /// The work one replica does at a time (a chat channel's receiving),
    /// and who does it.
    pub leases: Vec<Lease>,
    pub claims: Vec<Claimed>,
    /// The sessions whose replica is gone while a run of theirs went on:
    /// the runs waiting for another replica to take them over.
    pub waiting: i64,
    /// The messages queued for a session's replica that no replica has
    /// claimed yet.
    pub queued: i64,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replica {
    pub name: String,
    pub version: String,
    /// Milliseconds since the epoch.
    pub started_at: i64,
    pub seen_at: i64,
    /// It renewed its presence within the lease.
    pub alive: bool,
    /// The sessions it holds (their leases), and the runs it has going.
    pub sessions: i64,
    pub running: i64,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// `channel:<name>`.
    pub name: String,
    pub replica: String,
    /// Milliseconds since the epoch.
    pub taken_at: i64,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Claimed {
    /// `cron:<job>` or `heartbeat`.
    pub name: String,
    pub slot_ms: i64,
    pub replica: String,
}

/// How long the store may take to answer one request (or to connect)
/// before it counts as unreachable: a half-open connection must not hold
/// the scheduler for good.
/// How many connections a replica's requests share (besides the two
/// writers' own, of transcript lines and of run events).
const CONNECTIONS: usize = 4;

const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long joining may take: bringing the schema up to date waits for
/// another replica doing it.
const JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A scheduled run's claim is kept this long after the run's time (the
/// latest claim of each name, which catching up reads, is newer).
const KEEP_CLAIMS_MS: i64 = 7 * 24 * 3600 * 1000;

/// What the channels received is remembered this long: a platform
/// delivers a message again within minutes (Slack), hours (Telegram's
/// unconfirmed updates) or 36 hours (WhatsApp's webhook retries).
const KEEP_INBOUND: &str = "3 days";

/// The most claims `status` lists, newest first.
const STATUS_CLAIMS: i64 = 20;

impl Store {
    fn new(url: &str, replica: &str, timeout: std::time::Duration) -> Self {
        Self {
            url: url.to_string(),
            replica: replica.to_string(),
            timeout,
            clients: (0..CONNECTIONS).map(|_| Mutex::new(None)).collect(),
            next_client: std::sync::atomic::AtomicUsize::new(0),
            lease_seconds: std::sync::atomic::AtomicI64::new(
                i64::try_from(crate::config::cluster::DEFAULT_LEASE_SECONDS).unwrap_or(15),
            ),
            lines: std::sync::OnceLock::new(),
            events: std::sync::OnceLock::new(),
            keep_ended: std::sync::atomic::AtomicU64::new(
                u64::try_from(events::KEEP_ENDED.as_millis()).unwrap_or(60_000),
            ),
            queue_pruned: parking_lot::Mutex::new(None),
        }
    }

    /// The store at `url`, for reading its state (`pincer cluster
    /// status`): no replica joins, and the schema must be there already.
    pub async fn open_to_read(url: &str) -> Result<Self, String> {
        let store = Self::new(url, "", STORE_TIMEOUT);
        let client = store.open().await?;
        *store.slot().await = Some(client);
        Ok(store)
    }

    /// [`Store::open_to_read`], kept for the next call with the same URL
    /// (`pincer acp`'s `session/list` and `session/load`, which an editor
    /// calls again and again): connected once, its connections made again
    /// when lost.
    pub async fn reader(url: &str) -> Result<Arc<Self>, String> {
        static READER: std::sync::OnceLock<Mutex<Option<Arc<Store>>>> = std::sync::OnceLock::new();
        let mut kept = READER.get_or_init(Mutex::default).lock().await;
        if let Some(store) = kept.as_ref().filter(|store| store.url == url) {
            return Ok(store.clone());
        }
        let store = Arc::new(Self::open_to_read(url).await?);
        *kept = Some(store.clone());
        Ok(store)
    }

    /// The replicas and the latest claims; a replica is alive when it
    /// renewed its presence within `lease_seconds`.
    pub async fn status(&self, lease_seconds: u64) -> Result<Status, String> {
        let lease = i64::try_from(lease_seconds).unwrap_or(i64::MAX);
        self.with_client(async |client| {
            let replicas = client
                .query(
                    "SELECT r.name, r.version,
                            (extract(epoch FROM r.started_at) * 1000)::bigint,
                            (extract(epoch FROM r.seen_at) * 1000)::bigint,
                            r.seen_at > now() - make_interval(secs => $1::bigint),
                            (SELECT count(*) FROM pincer_sessions s WHERE s.replica = r.name),
                            (SELECT count(*) FROM pincer_sessions s
                             WHERE s.replica = r.name AND s.running IS NOT NULL)
                     FROM pincer_replicas r ORDER BY r.name",
                    &[&lease],
                )
                .await?
                .iter()
                .map(|row| Replica {
                    name: row.get(0),
                    version: row.get(1),
                    started_at: row.get(2),
                    seen_at: row.get(3),
                    alive: row.get(4),
                    sessions: row.get(5),
                    running: row.get(6),
                })
                .collect();
            let waiting = client
                .query_one(
                    "SELECT count(*) FROM pincer_sessions s
                     LEFT JOIN pincer_replicas r ON r.name = s.replica
                     WHERE s.running IS NOT NULL
                       AND (r.seen_at IS NULL
                            OR r.seen_at <= now() - make_interval(secs => $1::bigint))",
                    &[&lease],
                )
                .await?
                .get(0);
            let leases = client
                .query(
                    "SELECT name, replica, (extract(epoch FROM taken_at) * 1000)::bigint
                     FROM pincer_leases ORDER BY name",
                    &[],
                )
                .await?
                .iter()
                .map(|row| Lease {
                    name: row.get(0),
                    replica: row.get(1),
                    taken_at: row.get(2),
                })
                .collect();
            let queued = client
                .query_one(
                    "SELECT count(*) FROM pincer_run_queue WHERE claimed_by IS NULL",
                    &[],
                )
                .await?
                .get(0);
            let claims = client
                .query(
                    "SELECT name, slot_ms, replica FROM pincer_schedule_claims
                     ORDER BY slot_ms DESC, name LIMIT $1",
                    &[&STATUS_CLAIMS],
                )
                .await?
                .iter()
                .map(|row| Claimed {
                    name: row.get(0),
                    slot_ms: row.get(1),
                    replica: row.get(2),
                })
                .collect();
            Ok(Status {
                replicas,
                leases,
                claims,
                waiting,
                queued,
            })
        })
        .await
    }

    /// How long a replica's claims last without being renewed.
    pub fn set_lease(&self, seconds: u64) {
        self.lease_seconds.store(
            i64::try_from(seconds).unwrap_or(i64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Says every `every` that this replica is alive, for as long as the
    /// process runs (the replica is in the cluster whether or not it has
    /// scheduled runs to claim).
    pub fn keep_alive(self: &Arc<Self>, every: std::time::Duration) {
        let store = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let replica = store.replica.clone();
                let renewed = store
                    .with_client(async |client| {
                        client
                            .execute(
                                "UPDATE pincer_replicas SET seen_at = now() WHERE name = $1",
                                &[&replica],
                            )
                            .await
                    })
                    .await;
                if let Err(e) = renewed {
                    tracing::warn!("cluster: could not renew this replica's presence: {e}");
                }
            }
        });
    }

    /// Connects to the store at `url`, brings its schema up to date and
    /// registers `replica` (forgetting replicas gone for a day: each start
    /// under the default name is a new one).
    pub async fn connect(url: &str, replica: &str) -> Result<Arc<Self>, String> {
        Self::connect_within(url, replica, STORE_TIMEOUT).await
    }

    /// [`Store::connect`] with each request's `timeout`.
    async fn connect_within(
        url: &str,
        replica: &str,
        timeout: std::time::Duration,
    ) -> Result<Arc<Self>, String> {
        tokio::time::timeout(JOIN_TIMEOUT, Self::join(url, replica, timeout))
            .await
            .map_err(|_| {
                format!(
                    "cluster store {}: joining took longer than {} s",
                    redacted(url),
                    JOIN_TIMEOUT.as_secs()
                )
            })?
    }

    async fn join(
        url: &str,
        replica: &str,
        timeout: std::time::Duration,
    ) -> Result<Arc<Self>, String> {
        let store = Arc::new(Self::new(url, replica, timeout));
        {
            let mut client = store.slot().await;
            let connected = store.open().await?;
            migrate(&connected).await.map_err(|e| {
                format!(
                    "cluster store {}: could not bring its schema up to date: {e}",
                    redacted(url)
                )
            })?;
            connected
                .execute(
                    "INSERT INTO pincer_replicas (name, version) VALUES ($1, $2)
                     ON CONFLICT (name) DO UPDATE SET started_at = now(), seen_at = now(), version = $2",
                    &[&store.replica, &env!("CARGO_PKG_VERSION")],
                )
                .await
                .map_err(|e| format!("cluster store {}: {e}", redacted(url)))?;
            connected
                .execute(
                    "DELETE FROM pincer_replicas WHERE seen_at < now() - interval '1 day'",
                    &[],
                )
                .await
                .map_err(|e| format!("cluster store {}: {e}", redacted(url)))?;
            *client = Some(connected);
        }
        Ok(store)
    }

    async fn open(&self) -> Result<Client, String> {
        let unreachable = |why: String| {
            format!(
                "cannot reach the cluster store {}: {why}",
                redacted(&self.url)
            )
        };
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let mut dial = tls::plan(&self.url, home.as_deref())?;
        // Which replica a connection is, in `pg_stat_activity`, unless
        // the URL names it.
        if dial.config.get_application_name().is_none() {
            let name = if self.replica.is_empty() {
                "pincer (reading)".to_string()
            } else {
                format!("pincer replica {}", self.replica)
            };
            dial.config.application_name(&name);
        }
        let (client, connection) =
            tokio::time::timeout(self.timeout, dial.config.connect(dial.tls))
                .await
                .map_err(|_| unreachable(format!("no answer within {:?}", self.timeout)))?
                .map_err(|e| unreachable(with_causes(&e)))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("the cluster store's connection ended: {e}");
            }
        });
        Ok(client)
    }

    /// A free connection's slot (the first free, so that more are made
    /// only when requests overlap), or, when all are busy, the next in
    /// turn once it is free.
    async fn slot(&self) -> tokio::sync::MutexGuard<'_, Option<Client>> {
        for slot in &self.clients {
            if let Ok(free) = slot.try_lock() {
                return free;
            }
        }
        let next = self
            .next_client
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.clients[next % self.clients.len()].lock().await
    }

    /// Runs `work` on a free connection, connecting first if it was not
    /// made yet or was lost.
    async fn with_client<T>(
        &self,
        work: impl AsyncFnOnce(&Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, String> {
        let mut client = self.slot().await;
        if client.as_ref().is_none_or(Client::is_closed) {
            *client = Some(self.open().await?);
        }
        let Some(connected) = client.as_ref() else {
            return Err("no connection to the cluster store".to_string());
        };
        let Ok(done) = tokio::time::timeout(self.timeout, work(connected)).await else {
            // The next request connects again.
            *client = None;
            return Err(format!(
                "cluster store {}: no answer within {:?}",
                redacted(&self.url),
                self.timeout
            ));
        };
        if done.is_err() && connected.is_closed() {
            *client = None;
        }
        done.map_err(|e| format!("cluster store {}: {e}", redacted(&self.url)))
    }
}

#[async_trait::async_trait]
impl super::Claims for Store {
    async fn claim(&self, name: &str, slot_ms: i64) -> Result<bool, String> {
        let replica = self.replica.clone();
        let written = self
            .with_client(async |client| {
                let written = client
                    .execute(
                        "INSERT INTO pincer_schedule_claims (name, slot_ms, replica)
                         VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                        &[&name, &slot_ms, &replica],
                    )
                    .await?;
                // The winner forgets the runs long past, so that a job that
                // runs every second does not grow the table for good.
                if written == 1 {
                    client
                        .execute(
                            "DELETE FROM pincer_schedule_claims WHERE name = $1 AND slot_ms < $2",
                            &[&name, &(slot_ms - KEEP_CLAIMS_MS)],
                        )
                        .await?;
                }
                Ok(written)
            })
            .await?;
        Ok(written == 1)
    }

    async fn last(&self, name: &str) -> Result<Option<i64>, String> {
        self.with_client(async |client| {
            let row = client
                .query_one(
                    "SELECT max(slot_ms) FROM pincer_schedule_claims WHERE name = $1",
                    &[&name],
                )
                .await?;
            row.try_get::<_, Option<i64>>(0)
        })
        .await
    }

    async fn hold(&self, name: &str) -> Result<bool, String> {
        let replica = self.replica.clone();
        let lease = self
            .lease_seconds
            .load(std::sync::atomic::Ordering::Relaxed);
        self.with_client(async |client| {
            // This replica's already, or nobody's, or its holder's whose
            // presence ran out; and only while this replica's own has not.
            let rows = client
                .query(
                    "INSERT INTO pincer_leases AS l (name, replica)
                     SELECT $1, $2 WHERE EXISTS (
                         SELECT 1 FROM pincer_replicas
                         WHERE name = $2 AND seen_at > now() - make_interval(secs => $3::bigint))
                     ON CONFLICT (name) DO UPDATE
                     SET replica = EXCLUDED.replica,
                         taken_at = CASE WHEN l.replica = EXCLUDED.replica THEN l.taken_at ELSE now() END
                     WHERE l.replica = EXCLUDED.replica
                        OR NOT EXISTS (
                            SELECT 1 FROM pincer_replicas r
                            WHERE r.name = l.replica
                              AND r.seen_at > now() - make_interval(secs => $3::bigint))
                     RETURNING replica",
                    &[&name, &replica, &lease],
                )
                .await?;
            Ok(!rows.is_empty())
        })
        .await
    }

    async fn first(&self, id: &str) -> Result<bool, String> {
        let replica = self.replica.clone();
        let written = self
            .with_client(async |client| {
                let written = client
                    .execute(
                        "INSERT INTO pincer_inbound (id, replica) VALUES ($1, $2)
                         ON CONFLICT DO NOTHING",
                        &[&id, &replica],
                    )
                    .await?;
                if written == 1 {
                    client
                        .execute(
                            &format!(
                                "DELETE FROM pincer_inbound WHERE taken_at < now() - interval '{KEEP_INBOUND}'"
                            ),
                            &[],
                        )
                        .await?;
                }
                Ok(written)
            })
            .await?;
        Ok(written == 1)
    }
}

/// Applies the migrations the store has not had, in order, each in its
/// own transaction, under an advisory lock.
async fn migrate(client: &Client) -> Result<(), tokio_postgres::Error> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let applied = apply(client).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    applied.and(unlocked.map(|_| ()))
}

async fn apply(client: &Client) -> Result<(), tokio_postgres::Error> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS pincer_migrations (
                 version INTEGER PRIMARY KEY,
                 name TEXT NOT NULL,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
        )
        .await?;
    let rows = client
        .query("SELECT version FROM pincer_migrations", &[])
        .await?;
    let done: Vec<i32> = rows.iter().map(|row| row.get(0)).collect();
    for (version, name, sql) in MIGRATIONS {
        if done.contains(version) {
            continue;
        }
        client.batch_execute("BEGIN").await?;
        let step = async {
            client.batch_execute(sql).await?;
            client
                .execute(
                    "INSERT INTO pincer_migrations (version, name) VALUES ($1, $2)",
                    &[version, name],
                )
                .await
        }
        .await;
        match step {
            Ok(_) => client.batch_execute("COMMIT").await?,
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(e);
            }
        }
        tracing::info!("cluster store: applied migration {version} ({name})");
    }
    Ok(())
}

/// An error with what caused it (tokio-postgres says only "error
/// performing TLS handshake"; the certificate's fault is its cause).
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let more = e.to_string();
        if !said.contains(&more) {
            said.push_str(": ");
            said.push_str(&more);
        }
        cause = e.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that takes the connection and never answers (a half-open
    /// line, a wrong port) is unreachable after the timeout, not waited on
    /// for good.
    #[tokio::test]
    async fn a_store_that_never_answers_is_unreachable_after_the_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let _held = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let url = format!("postgres://u:pw@127.0.0.1:{port}/db");
        let timeout = std::time::Duration::from_millis(300);
        let error = match Store::connect_within(&url, "r", timeout).await {
            Ok(_) => panic!("connected to a server that never answers"),
            Err(error) => error,
        };
        assert!(error.contains("no answer within 300ms"), "{error}");
        assert!(!error.contains("pw@"), "{error}");
    }

    #[test]
    fn migrations_are_numbered_in_order_from_one() {
        for (i, (version, _, sql)) in MIGRATIONS.iter().enumerate() {
            assert_eq!(*version as usize, i + 1);
            assert!(!sql.trim().is_empty());
        }
    }
}
