//! The client side of the gateway protocol, for `pincer acp --connect`: one
//! websocket to a gateway (pincer's or OpenClaw's), kept up for as long as
//! the process lives.
//!
//! It does the handshake (`connect.challenge` → `connect` → `hello-ok`),
//! correlates requests with their responses by id, hands every event to one
//! consumer in the order the socket delivered it, and watches the line: a
//! gateway that sends nothing (not even its `tick`) for twice the interval
//! its hello promised is taken for gone. A lost connection is dialled again
//! with backoff (250 ms doubling to 30 s); the consumer hears
//! [`Incoming::Disconnected`] and [`Incoming::Connected`] so that it can
//! reconcile what it missed. A gateway that refuses the credential is not
//! dialled again by itself (a lockout would follow): only a caller's
//! [`Client::ensure`] tries once more.
//!
//! The credential goes in the `connect` frame and nowhere else; `wss://`
//! verifies the server against the system's roots (`SSL_CERT_FILE` and
//! `SSL_CERT_DIR` are honoured).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::frames::PROTOCOL;
use crate::llm::Secret;

/// How long one dial (TCP, TLS, the websocket upgrade) and then each step of
/// the handshake may take.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The first wait before dialling again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The largest frame accepted from the gateway (OpenClaw's `maxPayload` is
/// 25 MiB; `chat.history` answers stay under 6 MiB).
pub(crate) const MAX_FRAME: usize = 32 << 20;

/// What the client proves itself with.
#[derive(Clone, Debug)]
pub enum Credential {
    Token(Secret),
    Password(Secret),
}

/// What [`Client::start`] needs.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// `ws://` or `wss://`, already checked to carry no credential.
    pub url: String,
    pub credential: Credential,
}

/// Why a request or a connection failed. Each says which gateway, so that
/// an editor's error banner is enough to act on.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the gateway at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the gateway at {url} refused the connection: {message}")]
    Refused {
        url: String,
        message: String,
        /// `error.details.code`, such as `AUTH_TOKEN_MISMATCH`.
        code: Option<String>,
        /// The gateway said trying again later may succeed (a lockout).
        retryable: bool,
    },
    #[error("the connection to the gateway at {url} was lost ({reason})")]
    Disconnected { url: String, reason: String },
    #[error("{message}")]
    Rpc {
        /// The protocol's error code (`INVALID_REQUEST`, `FORBIDDEN`, …).
        code: String,
        message: String,
        details: Value,
    },
}

impl ClientError {
    /// The protocol code of an error the gateway answered.
    pub fn rpc_code(&self) -> Option<&str> {
        match self {
            Self::Rpc { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// What the gateway said about itself in `hello-ok`.
#[derive(Clone, Debug)]
pub struct Hello {
    /// `server.version`: `pincer 0.1.0` for pincer's gateway.
    pub server_version: String,
    /// `server.bootId`, when the gateway names its process's life.
    pub boot_id: Option<String>,
    pub tick_interval: Duration,
    /// `snapshot.sessionDefaults` (pincer's gateway adds `cwd`).
    pub session_defaults: Value,
    /// `features.methods`.
    pub methods: Vec<String>,
}

impl Hello {
    /// Whether the gateway is pincer's (which knows permission modes, queue
    /// modes and the `cwd` of new sessions).
    pub fn is_pincer(&self) -> bool {
        self.server_version.starts_with("pincer")
    }
}

/// What the consumer hears, in the order it happened.
#[derive(Debug)]
pub enum Incoming {
    /// A connection is up; `again` after the first one, `restarted` when
    /// the gateway's `bootId` differs from the previous connection's (its
    /// runs from before are gone).
    Connected {
        hello: Arc<Hello>,
        again: bool,
        restarted: bool,
    },
    /// An event frame (`seq` is the connection's counter, when sent).
    Event {
        name: String,
        payload: Value,
        seq: Option<u64>,
    },
    /// The connection went down; requests in flight failed with
    /// [`ClientError::Disconnected`]. A new one is being dialled.
    Disconnected { reason: String },
}

/// A handle on the connection; cheap to clone.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    options: ClientOptions,
    state: Mutex<State>,
    /// Bumped whenever `state` changes.
    changed: watch::Sender<u64>,
    /// Wakes the dialler before its backoff ends (or after a refusal).
    wake: Notify,
    incoming: mpsc::UnboundedSender<Incoming>,
    tls: Mutex<Option<Arc<rustls::ClientConfig>>>,
}

#[derive(Default)]
struct State {
    link: Option<Arc<Link>>,
    hello: Option<Arc<Hello>>,
    /// Dials finished so far, failed or not.
    attempts: u64,
    dialling: bool,
    last_error: Option<ClientError>,
    /// The gateway refused the credential: no dialling until asked.
    refused: bool,
    connected_once: bool,
}

/// One live websocket.
struct Link {
    out: mpsc::UnboundedSender<Message>,
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, ClientError>>>>,
    next_id: AtomicU64,
}

impl Client {
    /// Starts dialling at once; events arrive on the returned receiver.
    pub fn start(options: ClientOptions) -> (Self, mpsc::UnboundedReceiver<Incoming>) {
        let (incoming, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            options,
            // The dialler starts at once: a caller before its first dial
            // waits for that dial rather than asking for another.
            state: Mutex::new(State {
                dialling: true,
                ..State::default()
            }),
            changed: watch::channel(0).0,
            wake: Notify::new(),
            incoming,
            tls: Mutex::new(None),
        });
        tokio::spawn(dial_forever(Arc::downgrade(&shared)));
        (Self { shared }, rx)
    }

    pub fn url(&self) -> &str {
        &self.shared.options.url
    }

    /// The last `hello-ok`, once a connection was up.
    pub fn hello(&self) -> Option<Arc<Hello>> {
        self.shared.state.lock().hello.clone()
    }

    /// Waits until the connection is up. If it is down, one more dial is
    /// made now (also after a refusal) and its failure is the error; the
    /// wait is bounded by `wait`.
    pub async fn ensure(&self, wait: Duration) -> Result<Arc<Hello>, ClientError> {
        let mut changes = self.shared.changed.subscribe();
        let (target, dialling) = {
            let mut state = self.shared.state.lock();
            if let (Some(_), Some(hello)) = (&state.link, &state.hello) {
                return Ok(hello.clone());
            }
            state.refused = false;
            (state.attempts + 1, state.dialling)
        };
        // A dial under way is the attempt waited for; waking the dialler
        // then would leave a wake-up behind, and a second dial after it
        // (also after a refusal, which is not to be retried by itself).
        if !dialling {
            self.shared.wake.notify_one();
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            {
                let state = self.shared.state.lock();
                if let (Some(_), Some(hello)) = (&state.link, &state.hello) {
                    return Ok(hello.clone());
                }
                if state.attempts >= target
                    && let Some(error) = &state.last_error
                {
                    return Err(error.clone());
                }
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    let state = self.shared.state.lock();
                    return Err(state.last_error.clone().unwrap_or_else(|| {
                        ClientError::Unreachable {
                            url: self.shared.options.url.clone(),
                            reason: format!("no connection within {} s", wait.as_secs()),
                        }
                    }));
                }
            }
        }
    }

    /// Waits up to `wait` for a connection to be up, while the dialler
    /// keeps trying at its own pace; whether one is.
    pub async fn up_within(&self, wait: Duration) -> bool {
        let mut changes = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.shared.state.lock().link.is_some() {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => return self.shared.state.lock().link.is_some(),
            }
        }
    }

    /// Sends a request on the current connection (waiting up to `wait` for
    /// one) and waits for its answer, without a time limit when `timeout`
    /// is `None` (a turn can take as long as it takes).
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        wait: Duration,
        timeout: Option<Duration>,
    ) -> Result<Value, ClientError> {
        self.ensure(wait).await?;
        let Some(link) = self.shared.state.lock().link.clone() else {
            return Err(self.disconnected("the connection closed"));
        };
        let id = link.next_id.fetch_add(1, Ordering::Relaxed).to_string();
        let (tx, rx) = oneshot::channel();
        link.pending.lock().insert(id.clone(), tx);
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        if link.out.send(Message::text(frame.to_string())).is_err() {
            link.pending.lock().remove(&id);
            return Err(self.disconnected("the connection closed"));
        }
        let answer = match timeout {
            None => rx.await,
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(answer) => answer,
                Err(_) => {
                    link.pending.lock().remove(&id);
                    return Err(ClientError::Unreachable {
                        url: self.shared.options.url.clone(),
                        reason: format!("no answer to {method} within {} s", limit.as_secs()),
                    });
                }
            },
        };
        answer.unwrap_or_else(|_| Err(self.disconnected("the connection closed")))
    }

    fn disconnected(&self, reason: &str) -> ClientError {
        ClientError::Disconnected {
            url: self.shared.options.url.clone(),
            reason: reason.to_string(),
        }
    }
}

impl Shared {
    fn update(&self, change: impl FnOnce(&mut State)) {
        change(&mut self.state.lock());
        self.changed.send_modify(|n| *n += 1);
    }

    fn tls_config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut cached = self.tls.lock();
        if let Some(config) = cached.as_ref() {
            return Ok(config.clone());
        }
        let config = tls_config()?;
        *cached = Some(config.clone());
        Ok(config)
    }
}

/// A client websocket's settings: frames up to [`MAX_FRAME`], read
/// [`READ_BUFFER`] at a time.
pub(crate) fn socket_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME))
        .read_buffer_size(READ_BUFFER)
}

/// What a client websocket reads at once. tungstenite zeroes the whole
/// buffer before every read, and its default is 128 KiB: for a stream of
/// small frames (a session's chunks) that zeroing was most of the work.
pub(crate) const READ_BUFFER: usize = 8 * 1024;

/// TLS for `wss://`: the system's roots (or `SSL_CERT_FILE`'s).
pub(crate) fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "no trusted root certificates were found on this system (install the CA \
             certificates, or point SSL_CERT_FILE at a PEM bundle)"
                .to_string(),
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Dials, serves the connection until it drops, and dials again, for as
/// long as a [`Client`] exists.
async fn dial_forever(weak: std::sync::Weak<Shared>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(shared) = weak.upgrade() else { return };
        shared.update(|s| s.dialling = true);
        match dial(&shared).await {
            Ok((link, hello, socket, queue)) => {
                let (again, restarted) = {
                    let state = shared.state.lock();
                    let before = state.hello.as_ref().and_then(|h| h.boot_id.as_deref());
                    let restarted = matches!(
                        (before, hello.boot_id.as_deref()),
                        (Some(before), Some(now)) if before != now
                    );
                    (state.connected_once, restarted)
                };
                shared.update(|s| {
                    s.link = Some(link.clone());
                    s.hello = Some(hello.clone());
                    s.attempts += 1;
                    s.dialling = false;
                    s.last_error = None;
                    s.connected_once = true;
                });
                let _ = shared.incoming.send(Incoming::Connected {
                    hello: hello.clone(),
                    again,
                    restarted,
                });
                backoff = FIRST_BACKOFF;
                let reason = serve(&shared, &link, &hello, socket, queue).await;
                tracing::info!(url = %shared.options.url, %reason, "the gateway connection dropped");
                let error = ClientError::Disconnected {
                    url: shared.options.url.clone(),
                    reason: reason.clone(),
                };
                for (_, waiter) in link.pending.lock().drain() {
                    let _ = waiter.send(Err(error.clone()));
                }
                shared.update(|s| {
                    s.link = None;
                    s.last_error = Some(error);
                });
                let _ = shared.incoming.send(Incoming::Disconnected { reason });
            }
            Err(error) => {
                tracing::info!(url = %shared.options.url, %error, "could not connect to the gateway");
                let refused = matches!(
                    error,
                    ClientError::Refused {
                        retryable: false,
                        ..
                    }
                );
                shared.update(|s| {
                    s.attempts += 1;
                    s.dialling = false;
                    s.last_error = Some(error);
                    s.refused = refused;
                });
            }
        }
        let refused = shared.state.lock().refused;
        let wake = shared.clone();
        drop(shared);
        if refused {
            wake.wake.notified().await;
        } else {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = wake.wake.notified() => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        drop(wake);
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A connection after its handshake, and the queue its writer drains.
type Dialled = (
    Arc<Link>,
    Arc<Hello>,
    Socket,
    mpsc::UnboundedReceiver<Message>,
);

/// One dial: the socket, the challenge, `connect`, `hello-ok`.
async fn dial(shared: &Shared) -> Result<Dialled, ClientError> {
    let url = shared.options.url.clone();
    let unreachable = |reason: String| ClientError::Unreachable {
        url: url.clone(),
        reason,
    };
    let connector = if url.starts_with("wss://") {
        Some(tokio_tungstenite::Connector::Rustls(
            shared.tls_config().map_err(unreachable)?,
        ))
    } else {
        Some(tokio_tungstenite::Connector::Plain)
    };
    let dialled = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::connect_async_tls_with_config(
            url.as_str(),
            Some(socket_config()),
            true,
            connector,
        ),
    )
    .await
    .map_err(|_| {
        unreachable(format!(
            "no answer within {} s",
            HANDSHAKE_TIMEOUT.as_secs()
        ))
    })?;
    let (mut socket, _) = dialled.map_err(|e| unreachable(describe(&e)))?;

    // The challenge comes first; pincer ignores its nonce (it signs no
    // device identity) but a gateway that sends none is not one.
    let challenge = next_json(&mut socket)
        .await
        .map_err(|reason| unreachable(format!("during the handshake: {reason}")))?;
    if challenge["type"] != "event" || challenge["event"] != "connect.challenge" {
        return Err(unreachable(
            "it did not start with `connect.challenge`; is this a gateway?".to_string(),
        ));
    }
    let auth = match &shared.options.credential {
        Credential::Token(secret) => json!({"token": secret.expose()}),
        Credential::Password(secret) => json!({"password": secret.expose()}),
    };
    let connect = json!({
        "type": "req",
        "id": "connect",
        "method": "connect",
        "params": {
            "minProtocol": PROTOCOL,
            "maxProtocol": PROTOCOL,
            "client": {
                "id": "cli",
                "displayName": "pincer acp",
                "version": env!("CARGO_PKG_VERSION"),
                "platform": std::env::consts::OS,
                "mode": "cli",
            },
            // Events of the sessions this client uses only, and `chat`
            // deltas without the run's whole text (it builds that itself).
            "caps": ["tool-events", "exec-approvals", "session-scoped-events", crate::gateway::conn::CHAT_DELTAS_CAP],
            "role": "operator",
            "scopes": ["operator.admin"],
            "auth": auth,
        },
    });
    socket
        .send(Message::text(connect.to_string()))
        .await
        .map_err(|e| unreachable(describe(&e)))?;
    let hello = loop {
        let frame = next_json(&mut socket)
            .await
            .map_err(|reason| unreachable(format!("during the handshake: {reason}")))?;
        if frame["type"] == "res" && frame["id"] == "connect" {
            break frame;
        }
    };
    if hello["ok"] != true {
        let error = &hello["error"];
        return Err(ClientError::Refused {
            url,
            message: error["message"]
                .as_str()
                .unwrap_or("no reason given")
                .to_string(),
            code: error["details"]["code"].as_str().map(String::from),
            retryable: error["retryable"] == true,
        });
    }
    let payload = &hello["payload"];
    let tick = payload["policy"]["tickIntervalMs"]
        .as_u64()
        .unwrap_or(30_000)
        .max(100);
    let hello = Arc::new(Hello {
        server_version: payload["server"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        boot_id: payload["server"]["bootId"]
            .as_str()
            .filter(|b| !b.is_empty())
            .map(String::from),
        tick_interval: Duration::from_millis(tick),
        session_defaults: payload["snapshot"]["sessionDefaults"].clone(),
        methods: payload["features"]["methods"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(String::from))
            .collect(),
    });
    let (out, queue) = mpsc::unbounded_channel();
    let link = Arc::new(Link {
        out,
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
    });
    Ok((link, hello, socket, queue))
}

/// A readable sentence for a dial failure.
pub(crate) fn describe(error: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error as E;
    match error {
        E::Io(e) => match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            // rustls reports a refused certificate as an I/O error.
            _ if e
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()) =>
            {
                format!(
                    "TLS: {e} (the server's certificate is not trusted here; for a private CA, \
                     point SSL_CERT_FILE at its certificate)"
                )
            }
            _ => e.to_string(),
        },
        E::Http(response) => format!(
            "it answered HTTP {} instead of a websocket{}",
            response.status(),
            response
                .body()
                .as_deref()
                .map(|b| format!(": {}", String::from_utf8_lossy(b).trim()))
                .unwrap_or_default()
        ),
        E::Tls(e) => format!("TLS: {e}"),
        E::Url(e) => format!("bad URL: {e}"),
        other => other.to_string(),
    }
}

/// The next text frame as JSON, within the handshake's time limit.
async fn next_json(socket: &mut Socket) -> Result<Value, String> {
    let deadline = tokio::time::Instant::now() + HANDSHAKE_TIMEOUT;
    loop {
        let message = tokio::time::timeout_at(deadline, socket.next())
            .await
            .map_err(|_| format!("nothing within {} s", HANDSHAKE_TIMEOUT.as_secs()))?;
        match message {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"));
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(match frame {
                    Some(f) => format!("closed {} {}", u16::from(f.code), f.reason),
                    None => "closed".to_string(),
                });
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(describe(&e)),
            None => return Err("closed".to_string()),
        }
    }
}

/// Serves one connection: writes what requests queue, reads frames, and
/// watches for silence. Returns why it ended.
async fn serve(
    shared: &Shared,
    link: &Link,
    hello: &Hello,
    socket: Socket,
    mut queue: mpsc::UnboundedReceiver<Message>,
) -> String {
    let (mut sink, mut stream) = socket.split();
    let silence = hello.tick_interval * 2;
    let mut watchdog = tokio::time::interval(hello.tick_interval.max(Duration::from_millis(200)));
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    let mut last_seq: Option<u64> = None;
    loop {
        tokio::select! {
            outgoing = queue.recv() => {
                let Some(message) = outgoing else {
                    return "the client closed it".to_string();
                };
                if let Err(e) = sink.send(message).await {
                    return describe(&e);
                }
            }
            frame = stream.next() => {
                heard = Instant::now();
                let text = match frame {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(frame))) => {
                        return match frame {
                            Some(f) => format!("the gateway closed it: {} {}", u16::from(f.code), f.reason),
                            None => "the gateway closed it".to_string(),
                        };
                    }
                    // Pings are answered by tungstenite; binary frames are
                    // not part of the protocol.
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return describe(&e),
                    None => return "the gateway closed it".to_string(),
                };
                let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                    tracing::warn!("the gateway sent a frame that is not JSON; ignored");
                    continue;
                };
                match frame["type"].as_str() {
                    Some("res") => answer(link, &frame),
                    Some("event") => {
                        let Some(name) = frame["event"].as_str().filter(|n| !n.is_empty()) else {
                            continue;
                        };
                        let seq = frame["seq"].as_u64();
                        if let (Some(seq), Some(last)) = (seq, last_seq)
                            && seq > last + 1
                        {
                            tracing::warn!(from = last, to = seq, "the gateway's event sequence has a gap");
                        }
                        if seq.is_some() {
                            last_seq = seq;
                        }
                        let payload = frame.get("payload").cloned().unwrap_or(Value::Null);
                        let _ = shared.incoming.send(Incoming::Event {
                            name: name.to_string(),
                            payload,
                            seq,
                        });
                    }
                    _ => {}
                }
            }
            _ = watchdog.tick() => {
                if heard.elapsed() > silence {
                    let close = CloseFrame {
                        code: CloseCode::Library(4000),
                        reason: "tick timeout".into(),
                    };
                    let _ = tokio::time::timeout(
                        Duration::from_secs(1),
                        sink.send(Message::Close(Some(close))),
                    )
                    .await;
                    return format!("nothing heard for {} ms", silence.as_millis());
                }
            }
        }
    }
}

/// Hands a response to the request waiting for it. A frame without a
/// usable id or `ok` is dropped, as OpenClaw's clients drop it.
fn answer(link: &Link, frame: &Value) {
    let (Some(id), Some(ok)) = (frame["id"].as_str(), frame["ok"].as_bool()) else {
        return;
    };
    let Some(waiter) = link.pending.lock().remove(id) else {
        return;
    };
    let result = if ok {
        Ok(frame.get("payload").cloned().unwrap_or(Value::Null))
    } else {
        let error = &frame["error"];
        Err(ClientError::Rpc {
            code: error["code"].as_str().unwrap_or("UNKNOWN").to_string(),
            message: error["message"]
                .as_str()
                .unwrap_or("the gateway gave no reason")
                .to_string(),
            details: error["details"].clone(),
        })
    };
    let _ = waiter.send(result);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tungstenite zeroes its read buffer before every read: a client
    /// following a stream of small frames must not zero 128 KiB for each.
    #[test]
    fn a_client_socket_reads_into_a_small_buffer() {
        let config = socket_config();
        assert!(config.read_buffer_size <= 16 * 1024, "{config:?}");
        assert_eq!(config.max_frame_size, Some(MAX_FRAME));
    }
}
