//! `[gateway]` in the user's config: where the websocket gateway listens,
//! how clients authenticate, and its limits. Only the user's file counts
//! (a project's `[gateway]` is ignored by the layering), and the credential
//! itself is never in the file: it comes from a variable or a file of its
//! own, so that config files can be shared without it.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The default port, OpenClaw's.
pub const DEFAULT_PORT: u16 = 18789;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    pub bind: Option<String>,
    pub port: Option<u16>,
    pub auth: Option<AuthMode>,
    pub token_env: Option<String>,
    pub token_file: Option<PathBuf>,
    pub password_env: Option<String>,
    pub password_file: Option<PathBuf>,
    /// Origins (`scheme://host[:port]`) whose pages may connect, besides
    /// the gateway's own.
    pub allowed_origins: Vec<String>,
    /// Where sessions created through the gateway work.
    pub cwd: Option<PathBuf>,
    pub tick_interval_ms: Option<u64>,
    pub handshake_timeout_ms: Option<u64>,
    pub approval_timeout_secs: Option<u64>,
    pub max_payload: Option<usize>,
    pub max_buffered_bytes: Option<usize>,
    pub max_connections: Option<usize>,
    pub max_connections_per_ip: Option<usize>,
    /// The most sessions one `/acp` client may have open at once.
    pub max_sessions_per_client: Option<usize>,
    pub auth_failures: Option<u32>,
    pub auth_lockout_secs: Option<u64>,
    /// Failed connects from all addresses together within
    /// `auth_lockout_secs` before addresses that have not authenticated
    /// recently must wait.
    pub auth_failures_global: Option<u32>,
    /// TCP connections that are not (yet) a websocket: page loads,
    /// webhooks, upgrade requests. Counted from `accept`.
    pub max_pending_connections: Option<usize>,
    pub max_pending_connections_per_ip: Option<usize>,
    /// Websockets that have not authenticated yet.
    pub max_preauth_connections: Option<usize>,
    pub max_preauth_connections_per_ip: Option<usize>,
    /// The longest a request's body may take to arrive (webhooks), from
    /// the end of its head; the head has `handshake_timeout_ms`.
    pub request_timeout_ms: Option<u64>,
    /// Reverse proxies (addresses or CIDR ranges) whose `X-Forwarded-For`
    /// or `Forwarded` header names the client.
    pub trusted_proxies: Vec<String>,
    /// Seconds a gateway session may stay idle before it is unloaded
    /// (loaded again on its next use).
    pub session_idle_secs: Option<u64>,
    /// An installed `openclaw` package (or its `dist/control-ui`) whose
    /// Control UI the gateway serves at `/` in place of pincer's page.
    pub control_ui: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    #[default]
    Token,
    Password,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Token => "token",
            Self::Password => "password",
        }
    }
}

impl GatewayConfig {
    pub fn bind(&self) -> &str {
        self.bind.as_deref().unwrap_or("127.0.0.1")
    }
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(DEFAULT_PORT)
    }
    pub fn auth(&self) -> AuthMode {
        self.auth.unwrap_or_default()
    }
    pub fn tick_interval_ms(&self) -> u64 {
        self.tick_interval_ms.unwrap_or(15_000).max(100)
    }
    /// OpenClaw's default (`DEFAULT_PREAUTH_HANDSHAKE_TIMEOUT_MS`): its
    /// clients sign the challenge with their device key before they
    /// connect, which takes seconds on a busy machine.
    pub fn handshake_timeout_ms(&self) -> u64 {
        self.handshake_timeout_ms.unwrap_or(15_000).max(50)
    }
    pub fn approval_timeout_secs(&self) -> u64 {
        self.approval_timeout_secs.unwrap_or(120).max(1)
    }
    pub fn max_payload(&self) -> usize {
        self.max_payload.unwrap_or(25 * 1024 * 1024).max(64 * 1024)
    }
    pub fn max_buffered_bytes(&self) -> usize {
        self.max_buffered_bytes
            .unwrap_or(50 * 1024 * 1024)
            .max(4096)
    }
    pub fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or(1024).max(1)
    }
    pub fn max_connections_per_ip(&self) -> usize {
        self.max_connections_per_ip.unwrap_or(256).max(1)
    }
    pub fn max_sessions_per_client(&self) -> usize {
        self.max_sessions_per_client.unwrap_or(256).max(1)
    }
    pub fn auth_failures(&self) -> u32 {
        self.auth_failures.unwrap_or(5).max(1)
    }
    pub fn auth_lockout_secs(&self) -> u64 {
        self.auth_lockout_secs.unwrap_or(60).max(1)
    }
    pub fn auth_failures_global(&self) -> u32 {
        self.auth_failures_global.unwrap_or(100).max(1)
    }
    pub fn max_pending_connections(&self) -> usize {
        self.max_pending_connections.unwrap_or(256).max(1)
    }
    pub fn max_pending_connections_per_ip(&self) -> usize {
        self.max_pending_connections_per_ip.unwrap_or(32).max(1)
    }
    pub fn max_preauth_connections(&self) -> usize {
        self.max_preauth_connections.unwrap_or(64).max(1)
    }
    pub fn max_preauth_connections_per_ip(&self) -> usize {
        self.max_preauth_connections_per_ip.unwrap_or(8).max(1)
    }
    pub fn request_timeout_ms(&self) -> u64 {
        self.request_timeout_ms.unwrap_or(10_000).max(50)
    }
    pub fn session_idle_secs(&self) -> u64 {
        self.session_idle_secs.unwrap_or(600).max(1)
    }

    /// The variable the credential may come from.
    pub fn credential_env(&self) -> &str {
        match self.auth() {
            AuthMode::Token => self.token_env.as_deref().unwrap_or("PINCER_GATEWAY_TOKEN"),
            AuthMode::Password => self
                .password_env
                .as_deref()
                .unwrap_or("PINCER_GATEWAY_PASSWORD"),
        }
    }

    /// The file the credential may come from: the configured one, else
    /// `<config dir>/gateway/token` (or `password`).
    pub fn credential_file(&self, config_dir: &Path) -> PathBuf {
        let configured = match self.auth() {
            AuthMode::Token => self.token_file.clone(),
            AuthMode::Password => self.password_file.clone(),
        };
        configured.unwrap_or_else(|| default_credential_file(config_dir, self.auth()))
    }
}

/// `<config dir>/gateway/token` or `…/password`.
pub fn default_credential_file(config_dir: &Path, mode: AuthMode) -> PathBuf {
    config_dir.join("gateway").join(mode.as_str())
}

/// Whether `bind` names only this machine: a loopback address or
/// `localhost`.
pub fn is_loopback(bind: &str) -> bool {
    let host = bind.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_only_this_machine() {
        for bind in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"] {
            assert!(is_loopback(bind), "{bind}");
        }
        for bind in ["0.0.0.0", "::", "192.168.1.4", "example.com", ""] {
            assert!(!is_loopback(bind), "{bind}");
        }
    }

    #[test]
    fn the_handshake_waits_as_long_as_openclaw_s() {
        assert_eq!(GatewayConfig::default().handshake_timeout_ms(), 15_000);
        let short = GatewayConfig {
            handshake_timeout_ms: Some(1),
            ..Default::default()
        };
        assert_eq!(short.handshake_timeout_ms(), 50);
    }

    #[test]
    fn a_project_gateway_table_is_ignored_even_when_trusted() {
        let user = crate::config::Config::default();
        let project: crate::config::Config = toml::from_str(
            "[gateway]\nbind = \"0.0.0.0\"\nport = 1\nallowed_origins = [\"https://evil.example\"]\n",
        )
        .unwrap();
        for trusted in [false, true] {
            let layered =
                crate::config::project::layer(user.clone(), project.clone(), trusted, &|_| true);
            assert_eq!(layered.config.gateway, None);
        }
    }
}
