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
}

/// What this gateway shares with the other replicas.
pub struct Cluster {
    pub claims: Arc<dyn Claims>,
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
            bus: None,
            joined: None,
        });
    };
    let replica = config.replica.clone().unwrap_or_else(default_replica);
    let store = postgres::Store::connect(url, &replica).await?;
    store.keep_alive(std::time::Duration::from_secs(config.lease_seconds()).div_f32(3.0));
    let mut joined = format!(
        "replica `{replica}` on store {}",
        crate::config::cluster::redacted(url)
    );
    let bus = match bus_url {
        Some(bus_url) => {
            let bus = bus::Bus::connect(bus_url, &replica, BUS_JOIN_TIMEOUT).await?;
            joined.push_str(&format!(
                " and bus {}",
                crate::config::cluster::redacted(bus_url)
            ));
            Some(Arc::new(bus))
        }
        None => None,
    };
    Ok(Cluster {
        claims: store,
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
