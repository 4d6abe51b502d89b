//! `system-presence`: who is here, as OpenClaw's presence entries. The
//! gateway itself first (`mode: "gateway"`, `reason: "self"`, which
//! OpenClaw's `status` and Control UI look for), then the connected
//! clients newest first, each as its `connect` described it
//! ([`Presence`]). Unlike OpenClaw's, the list holds only who is
//! connected now: a client that left is not kept for five minutes.

use super::Hub;
use crate::gateway::conn::Presence;
use crate::gateway::frames::now_ms;
use crate::gateway::protocol::system::PresenceEntry;

/// The most entries listed (OpenClaw's presence store keeps 200).
pub const MAX_ENTRIES: usize = 200;

impl Hub {
    /// The presence list, the gateway's own entry first.
    pub fn presence(&self) -> Vec<PresenceEntry> {
        // Taken out under the clients' lock (which every event takes),
        // sorted and written after it.
        let mut present: Vec<std::sync::Arc<crate::gateway::conn::Conn>> = self
            .conns()
            .all
            .values()
            .filter(|conn| conn.presence.is_some())
            .cloned()
            .collect();
        present.sort_by_key(|conn| {
            std::cmp::Reverse(conn.presence.as_deref().map_or(0, |p| p.since_ms))
        });
        let mut clients: Vec<PresenceEntry> = present
            .iter()
            .take(MAX_ENTRIES - 1)
            .filter_map(|conn| conn.presence.as_deref().map(Presence::entry))
            .collect();
        let mut list = Vec::with_capacity(clients.len() + 1);
        list.push(self.own_presence());
        list.append(&mut clients);
        list
    }

    /// The gateway's own entry: this machine's name and system, and
    /// pincer's version.
    fn own_presence(&self) -> PresenceEntry {
        let (host, platform) = machine();
        let version = format!("pincer {}", env!("CARGO_PKG_VERSION"));
        PresenceEntry {
            text: format!("Gateway: {host} · app {version} · mode gateway · reason self"),
            host: Some(host),
            version: Some(version),
            platform: Some(platform),
            device_family: Some("Linux".to_string()),
            mode: Some("gateway".to_string()),
            reason: "self",
            instance_id: Some(self.boot_id.clone()),
            ts: now_ms(),
            ..PresenceEntry::default()
        }
    }
}

/// The machine's host name and its system as OpenClaw writes it
/// (`linux 6.8.0`), from the kernel's own files.
fn machine() -> (String, String) {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty())
    };
    let host = read("hostname").unwrap_or_else(|| "localhost".to_string());
    let system =
        read("ostype").map_or_else(|| std::env::consts::OS.to_string(), |s| s.to_lowercase());
    let platform = match read("osrelease") {
        Some(release) => format!("{system} {release}"),
        None => system,
    };
    (host, platform)
}
