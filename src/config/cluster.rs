//! `[cluster]` in the user's config: the PostgreSQL database and the NATS
//! server that several `pincer gateway` processes share (a team gateway).
//! Without it, a gateway keeps everything on its own machine, as always.
//! Only the user's file counts: a repository never chooses where sessions
//! are stored or which servers pincer connects to.
//!
//! Each replica keeps its own credentials (model keys, channel tokens) in
//! its own config and environment: none of them is ever written to the
//! database or sent over the bus. The store's URL may hold the database's
//! password; pincer never prints it ([`redacted`]).

use serde::{Deserialize, Serialize};

/// How long a replica's claim on work lasts without being renewed.
pub const DEFAULT_LEASE_SECONDS: u64 = 15;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// `postgres://user[:password]@host[:port]/database`.
    pub store: Option<String>,
    /// `nats://host[:port]` (`tls://host[:port]` to insist on TLS).
    pub bus: Option<String>,
    /// A PEM file of the certificates that vouch for the bus's server,
    /// instead of the system's roots; the bus is then reached over TLS
    /// only.
    pub bus_ca: Option<std::path::PathBuf>,
    /// This replica's name in the cluster (its host name and process id
    /// by default).
    pub replica: Option<String>,
    /// How long a claim lasts without being renewed, in seconds.
    pub lease_seconds: Option<u64>,
}

impl ClusterConfig {
    pub fn lease_seconds(&self) -> u64 {
        self.lease_seconds.unwrap_or(DEFAULT_LEASE_SECONDS).max(2)
    }
}

/// A store or bus URL as it may be shown: its password, if any (before
/// the host, or a `password=` parameter), replaced by `***`.
pub fn redacted(url: &str) -> String {
    let (url, query) = match url.split_once('?') {
        Some((url, query)) => (url, Some(query)),
        None => (url, None),
    };
    let query = query.map(|query| {
        let pairs: Vec<&str> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => "password=***",
                _ => pair,
            })
            .collect();
        format!("?{}", pairs.join("&"))
    });
    format!("{}{}", redacted_authority(url), query.unwrap_or_default())
}

fn redacted_authority(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split(':').next().unwrap_or_default();
            let hidden = if user_info.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{hidden}@{host}{path}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_s_password_is_never_shown() {
        assert_eq!(
            redacted("postgres://team:s3cr%40t@db.internal:5432/pincer"),
            "postgres://team:***@db.internal:5432/pincer"
        );
        assert_eq!(
            redacted("postgres://team@db/pincer"),
            "postgres://team@db/pincer"
        );
        assert_eq!(redacted("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(redacted("nats://u:p@bus:4222"), "nats://u:***@bus:4222");
        assert_eq!(
            redacted("postgres://team@db/pincer?sslmode=disable&password=s3cret"),
            "postgres://team@db/pincer?sslmode=disable&password=***"
        );
    }

    #[test]
    fn a_lease_is_at_least_two_seconds() {
        let config = ClusterConfig {
            lease_seconds: Some(0),
            ..ClusterConfig::default()
        };
        assert_eq!(config.lease_seconds(), 2);
        assert_eq!(ClusterConfig::default().lease_seconds(), 15);
    }

    #[test]
    fn a_project_cluster_table_is_ignored_even_when_trusted() {
        let user: crate::config::Config =
            toml::from_str("[cluster]\nstore = \"postgres://team@db/pincer\"\n").unwrap();
        let project: crate::config::Config = toml::from_str(
            "[cluster]\nstore = \"postgres://evil@attacker.example/loot\"\nbus = \"nats://attacker.example\"\n",
        )
        .unwrap();
        for trusted in [false, true] {
            let layered =
                crate::config::project::layer(user.clone(), project.clone(), trusted, &|_| true);
            assert_eq!(
                layered.config.cluster.store.as_deref(),
                Some("postgres://team@db/pincer")
            );
            assert_eq!(layered.config.cluster.bus, None);
        }
    }
}
