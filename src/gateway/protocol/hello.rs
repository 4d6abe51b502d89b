//! The handshake: the `connect.challenge` event a client is greeted with,
//! and `hello-ok`, the answer to its `connect` (OpenClaw's
//! `HelloOkSchema`): the server, what it serves, a snapshot of its state,
//! the client's grant and the limits it must keep to.

use serde::Serialize;

use super::system::{PresenceEntry, SessionDefaults};

/// `connect.challenge`'s payload: a nonce a device may sign.
#[derive(Clone, Debug, Serialize)]
pub struct Challenge {
    pub nonce: String,
    pub ts: u64,
}

/// The event frame around it, which has no `seq`: it comes before the
/// connection's events.
#[derive(Clone, Debug, Serialize)]
pub struct ChallengeFrame {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub event: &'static str,
    pub payload: Challenge,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloOk {
    /// `hello-ok`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub protocol: u64,
    pub server: Server,
    pub features: Features,
    pub snapshot: Snapshot,
    pub auth: Grant,
    pub policy: Policy,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Server {
    pub version: String,
    pub conn_id: String,
    pub boot_id: String,
    /// `configured`: the Control UI it serves is not one it built, so
    /// OpenClaw's UI does not wait for a build of its own version (and
    /// wedge after a reconnect).
    pub control_ui_build_source: &'static str,
}

/// The methods and events it serves, and its capabilities.
#[derive(Clone, Debug, Serialize)]
pub struct Features {
    pub methods: Vec<&'static str>,
    pub events: &'static [&'static str],
    pub capabilities: &'static [&'static str],
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Empty: `system-presence` lists who is here.
    pub presence: Vec<PresenceEntry>,
    pub health: Health,
    pub state_version: StateVersion,
    pub uptime_ms: u64,
    pub auth_mode: &'static str,
    /// What a new session starts with (read after the handshake is
    /// accepted, off the runtime's workers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_defaults: Option<SessionDefaults>,
}

/// The health snapshot: pincer sends `health` answers, not a snapshot.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Health {}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StateVersion {
    pub presence: u64,
    pub health: u64,
}

/// The client's grant: its role, its scopes, and how it proved itself.
#[derive(Clone, Debug, Serialize)]
pub struct Grant {
    pub role: &'static str,
    pub scopes: Vec<String>,
    pub method: &'static str,
}

/// The limits a client keeps to.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    pub max_payload: usize,
    pub max_buffered_bytes: usize,
    pub tick_interval_ms: u64,
}
