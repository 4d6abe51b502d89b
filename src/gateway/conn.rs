//! One authenticated client as the rest of the gateway sees it: what it may
//! do (scopes), what it wants to hear (caps, sessions), and its outbox, a
//! queue bounded in bytes so that a client that stops reading is dropped
//! instead of growing pincer's memory or holding up the others.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::gateway::protocol::system::PresenceEntry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// pincer's own clients (the web page, the `pincer acp --connect` bridge)
/// send this cap in `connect.caps`: they build a run's text from the
/// deltas, so a `chat` delta need not repeat the whole text so far, which
/// made a long reply cost each client bytes quadratic in its length.
/// OpenClaw's clients (whose bridge reads only the cumulative `message`)
/// do not send it and get `message` as OpenClaw's gateway sends it.
pub const CHAT_DELTAS_CAP: &str = "pincer.chat-deltas";

/// What a client may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scopes {
    pub read: bool,
    pub write: bool,
    pub approvals: bool,
    pub admin: bool,
}

/// The scope a method or an event needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    Approvals,
    Admin,
}

impl Need {
    pub fn scope(self) -> &'static str {
        match self {
            Self::Read => "operator.read",
            Self::Write => "operator.write",
            Self::Approvals => "operator.approvals",
            Self::Admin => "operator.admin",
        }
    }

    /// The scopes any of which grants it.
    pub fn granted_by(self) -> Vec<&'static str> {
        match self {
            Self::Read => vec!["operator.read", "operator.write", "operator.admin"],
            Self::Write => vec!["operator.write", "operator.admin"],
            Self::Approvals => vec!["operator.approvals", "operator.admin"],
            Self::Admin => vec!["operator.admin"],
        }
    }
}

impl Scopes {
    /// The scopes a client asked for; none at all is the full authority of
    /// the credential it holds.
    pub fn from_requested(requested: &[String]) -> (Self, Vec<String>) {
        if requested.is_empty() {
            let all = Self {
                read: true,
                write: true,
                approvals: true,
                admin: true,
            };
            return (all, vec!["operator.admin".to_string()]);
        }
        let mut scopes = Self::default();
        let mut granted = Vec::new();
        for scope in requested {
            let known = match scope.as_str() {
                "operator.read" => {
                    scopes.read = true;
                    true
                }
                "operator.write" => {
                    scopes.write = true;
                    true
                }
                "operator.approvals" => {
                    scopes.approvals = true;
                    true
                }
                "operator.admin" => {
                    scopes.admin = true;
                    true
                }
                _ => false,
            };
            if known && !granted.contains(scope) {
                granted.push(scope.clone());
            }
        }
        (scopes, granted)
    }

    /// The scopes held, by their names.
    pub fn granted(self) -> Vec<&'static str> {
        [
            (self.admin, "operator.admin"),
            (self.read, "operator.read"),
            (self.write, "operator.write"),
            (self.approvals, "operator.approvals"),
        ]
        .into_iter()
        .filter_map(|(held, name)| held.then_some(name))
        .collect()
    }

    pub fn allows(self, need: Need) -> bool {
        self.admin
            || match need {
                Need::Read => self.read || self.write,
                Need::Write => self.write,
                Need::Approvals => self.approvals,
                Need::Admin => false,
            }
    }
}

/// A frame waiting for a client.
#[derive(Debug)]
pub enum Out {
    /// A whole frame (a response).
    Frame(String),
    /// An event; its `seq` is given when it is written.
    Event(&'static str, Arc<str>),
    /// A piece of a run's reply: its `chat` and `agent` events.
    Text(Box<Text>),
    /// The last frame: a close with its code and reason.
    Close(u16, &'static str),
}

impl Out {
    pub fn len(&self) -> usize {
        match self {
            Self::Frame(frame) => frame.len(),
            Self::Event(name, payload) => name.len() + payload.len() + 48,
            Self::Text(text) => text.chat.len() + text.agent.len() + 100,
            Self::Close(..) => 0,
        }
    }

    /// The events it carries, in order.
    pub fn events(&self) -> Vec<(&'static str, &Arc<str>)> {
        match self {
            Self::Event(name, payload) => vec![(*name, payload)],
            Self::Text(text) => vec![("chat", &text.chat), ("agent", &text.agent)],
            _ => Vec::new(),
        }
    }
}

/// A piece of a run's reply as a client gets it: the `chat` delta and
/// the `agent` event with the same text, queued as one so that they
/// leave in one write.
#[derive(Debug)]
pub struct Text {
    pub chat: Arc<str>,
    pub agent: Arc<str>,
}

/// The queue of frames for one client.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Out>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    /// Cancelled when the client fell too far behind: it is dropped.
    pub slow: CancellationToken,
}

impl Outbox {
    pub fn new(limit: usize) -> (Self, Inbox) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let slow = CancellationToken::new();
        (
            Self {
                tx,
                queued: queued.clone(),
                limit,
                slow,
            },
            Inbox { rx, queued },
        )
    }

    /// Closes the connection after what is queued, whatever the queue's
    /// size.
    pub fn close(&self, code: u16, reason: &'static str) {
        let _ = self.tx.send(Out::Close(code, reason));
    }

    /// Queues a frame; `false` when the client is gone or too slow (it is
    /// then dropped: the frames it missed cannot be made up).
    pub fn push(&self, out: Out) -> bool {
        if self.slow.is_cancelled() {
            return false;
        }
        let len = out.len();
        if self.queued.fetch_add(len, Ordering::AcqRel) + len > self.limit {
            self.queued.fetch_sub(len, Ordering::AcqRel);
            self.slow.cancel();
            return false;
        }
        self.tx.send(out).is_ok()
    }
}

/// The writer's end of an [`Outbox`].
pub struct Inbox {
    pub rx: mpsc::UnboundedReceiver<Out>,
    queued: Arc<AtomicUsize>,
}

impl Inbox {
    /// A frame was written: its bytes no longer count.
    pub fn written(&self, out: &Out) {
        self.queued.fetch_sub(out.len(), Ordering::AcqRel);
    }
}

/// An authenticated client.
#[derive(Debug)]
pub struct Conn {
    pub id: u64,
    pub out: Outbox,
    pub scopes: Scopes,
    /// Sent the `tool-events` cap: it gets `agent` tool events.
    pub tool_events: bool,
    /// Sent the `session-scoped-events` cap: it gets chat and agent events
    /// of the sessions it used only.
    pub scoped: bool,
    /// Sent [`CHAT_DELTAS_CAP`]: its `chat` deltas carry the new text
    /// (`deltaText`) without the run's whole text so far (`message`).
    pub chat_deltas: bool,
    /// The sessions (ids) it used, when `scoped`.
    pub sessions: Mutex<HashSet<String>>,
    /// Called `sessions.subscribe`.
    pub sessions_changed: AtomicBool,
    /// What it said of itself in `connect`, for `system-presence`; none
    /// for the gateway's in-process clients and for OpenClaw's passing
    /// ones (`cli`, `backend`, `probe`), which OpenClaw does not list.
    pub presence: Option<Box<Presence>>,
}

/// A connected client as `system-presence` lists it (OpenClaw's presence
/// entry): what its `connect` said of it, each string cut to
/// [`Presence::MAX`] characters.
#[derive(Debug, Default)]
pub struct Presence {
    pub client_id: Option<String>,
    pub display_name: Option<String>,
    pub version: Option<String>,
    pub platform: Option<String>,
    pub device_family: Option<String>,
    pub mode: Option<String>,
    pub instance_id: Option<String>,
    pub role: String,
    pub scopes: Vec<&'static str>,
    /// The peer's address, for a client that is not on this machine.
    pub ip: Option<String>,
    /// When it connected (milliseconds since the epoch).
    pub since_ms: u64,
}

impl Presence {
    /// The longest string kept of what a client says of itself.
    pub const MAX: usize = 200;
    /// OpenClaw's client modes that connect for one call and go, which
    /// its presence list leaves out.
    const PASSING: [&str; 3] = ["cli", "backend", "probe"];

    /// The entry of a client whose `connect` params are `params`; `None`
    /// for a passing one.
    pub fn of(
        params: &serde_json::Value,
        role: &str,
        scopes: Scopes,
        peer: std::net::IpAddr,
        now_ms: u64,
    ) -> Option<Box<Self>> {
        let client = &params["client"];
        let text = |name: &str| {
            client[name]
                .as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| s.chars().take(Self::MAX).collect::<String>())
        };
        let mode = text("mode");
        if mode.as_deref().is_some_and(|m| Self::PASSING.contains(&m)) {
            return None;
        }
        Some(Box::new(Self {
            client_id: text("id"),
            display_name: text("displayName"),
            version: text("version"),
            platform: text("platform"),
            device_family: text("deviceFamily"),
            mode,
            instance_id: text("instanceId"),
            role: role.chars().take(Self::MAX).collect(),
            scopes: scopes.granted(),
            ip: (!peer.is_loopback()).then(|| peer.to_string()),
            since_ms: now_ms,
        }))
    }

    /// OpenClaw's presence entry.
    pub fn entry(&self) -> PresenceEntry {
        let host = self.display_name.as_ref().or(self.client_id.as_ref());
        PresenceEntry {
            host: host.cloned(),
            client_id: self.client_id.clone(),
            ip: self.ip.clone(),
            version: self.version.clone(),
            platform: self.platform.clone(),
            device_family: self.device_family.clone(),
            mode: self.mode.clone(),
            instance_id: self.instance_id.clone(),
            roles: Some(vec![self.role.clone()]),
            scopes: Some(self.scopes.clone()),
            reason: "connect",
            text: format!(
                "Node: {} · mode {}",
                host.map_or("unknown", String::as_str),
                self.mode.as_deref().unwrap_or("unknown")
            ),
            ts: self.since_ms,
            online_since: Some(self.since_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_scopes_is_the_credential_s_full_authority_and_read_only_is_read_only() {
        let (all, granted) = Scopes::from_requested(&[]);
        assert!(all.allows(Need::Admin));
        assert_eq!(granted, vec!["operator.admin"]);
        let (read, granted) = Scopes::from_requested(&["operator.read".into(), "x".into()]);
        assert_eq!(granted, vec!["operator.read"]);
        assert!(read.allows(Need::Read));
        for need in [Need::Write, Need::Approvals, Need::Admin] {
            assert!(!read.allows(need), "{need:?}");
        }
        let (write, _) = Scopes::from_requested(&["operator.write".into()]);
        assert!(write.allows(Need::Read) && write.allows(Need::Write));
        assert!(!write.allows(Need::Approvals));
    }

    #[test]
    fn a_client_that_falls_behind_is_dropped_not_buffered() {
        let (outbox, mut inbox) = Outbox::new(100);
        assert!(outbox.push(Out::Frame("x".repeat(60))));
        assert!(!outbox.push(Out::Frame("y".repeat(60))));
        assert!(outbox.slow.is_cancelled());
        assert!(!outbox.push(Out::Frame("z".into())));
        let first = inbox.rx.try_recv().unwrap();
        inbox.written(&first);
        assert!(inbox.rx.try_recv().is_err());
    }
}
