//! `pincer cluster status`: the replicas of a team gateway (the sessions
//! each holds and the runs it has going), the runs a gone replica left
//! waiting, and the scheduled runs they claimed, read from the cluster's
//! store.
#![allow(clippy::print_stdout)]

use anyhow::{Context, anyhow};

use crate::cluster::postgres::Store;
use crate::config::Settings;

/// Prints the store's replicas (alive or not, by `[cluster]
/// lease_seconds`) and its latest claims; `store` overrides `[cluster]
/// store`.
pub async fn status(store: Option<String>, json: bool) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    let settings = Settings::load_from_process(&cwd)?;
    let cluster = &settings.config.cluster;
    let url = store.or_else(|| cluster.store.clone()).ok_or_else(|| {
        anyhow!(
            "no cluster store: set `store` under [cluster] in {} or pass --store",
            settings.paths.user_config_file().display()
        )
    })?;
    let store = Store::open_to_read(&url)
        .await
        .map_err(anyhow::Error::msg)?;
    let status = store
        .status(cluster.lease_seconds())
        .await
        .map_err(anyhow::Error::msg)
        .context("reading the cluster's state (has a replica started on this store?)")?;
    if json {
        println!("{}", serde_json::to_string(&status)?);
        return Ok(());
    }
    println!("store: {}", crate::config::cluster::redacted(&url));
    if status.replicas.is_empty() {
        println!("no replica has joined");
    }
    for replica in &status.replicas {
        let state = if replica.alive { "alive" } else { "gone" };
        println!(
            "replica {}: {state}, pincer {}, last seen {}, {} sessions, {} running",
            replica.name,
            replica.version,
            time(replica.seen_at),
            replica.sessions,
            replica.running
        );
    }
    println!(
        "runs waiting for a replica to take them over: {}",
        status.waiting
    );
    println!(
        "messages queued for a session's replica, not yet claimed: {}",
        status.queued
    );
    for lease in &status.leases {
        println!(
            "lease {}: held by {} since {}",
            lease.name,
            lease.replica,
            time(lease.taken_at)
        );
    }
    for claim in &status.claims {
        println!(
            "claimed {} at {} by {}",
            claim.name,
            time(claim.slot_ms),
            claim.replica
        );
    }
    Ok(())
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}
