//! One websocket client from its first byte: the challenge, the `connect`
//! that must come first (small, soon, and with the credential), then its
//! requests, each answered on its own task so that a long one (`agent`,
//! `sessions.compact`) never holds up the others. Until `connect` succeeds
//! the client holds a place among unauthenticated websockets only; then it
//! trades it for one among authenticated clients.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::Gateway;
use super::auth::Refusal;
use super::conn::{Conn, Inbox, Out, Outbox, Presence, Scopes};
use super::frames::{self, ErrorShape, INVALID_REQUEST, PROTOCOL, UNAVAILABLE, now_ms};
use super::guard::Budget;
use super::peers::Slot;
use super::protocol::hello;
use tokio_util::sync::CancellationToken;

/// The websocket of one client.
pub type Socket =
    WebSocketStream<super::guard::Guarded<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>>;

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code: code.into(),
        reason: reason.to_string().into(),
    }))
}

/// Lets what the client still sends drain (so that it reads the close
/// frame rather than a reset), for a moment at most.
async fn drain(stream: &mut futures::stream::SplitStream<Socket>, budget: &Budget) {
    budget.drain();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
}

/// The largest frame before `connect` succeeds.
pub const MAX_PREAUTH: usize = 64 * 1024;

/// Requests one client may have running at once.
const MAX_IN_FLIGHT: usize = 256;

/// The most bytes of queued frames the writer gathers into one write.
pub const WRITE_BATCH: usize = 64 * 1024;

/// Why a handshake failed: the error to answer (if the frame had an id to
/// answer) and how to close.
struct Refused {
    error: Option<ErrorShape>,
    code: u16,
    reason: &'static str,
}

impl Refused {
    fn close(code: u16, reason: &'static str) -> Self {
        Self {
            error: None,
            code,
            reason,
        }
    }
}

/// Serves one client; `preauth` is its place among unauthenticated
/// websockets, held until `connect` succeeds.
pub async fn run(
    socket: Socket,
    budget: Arc<Budget>,
    peer: IpAddr,
    gateway: Arc<Gateway>,
    preauth: Slot,
) {
    let (mut sink, mut stream) = socket.split();
    // As text at once: a value kept in a local would be held by this
    // function's state for the connection's whole life.
    let challenge = hello::Challenge {
        nonce: uuid::Uuid::new_v4().simple().to_string(),
        ts: now_ms(),
    };
    // The one event outside the connection's sequence.
    let challenge = serde_json::to_string(&hello::ChallengeFrame {
        kind: "event",
        event: "connect.challenge",
        payload: challenge,
    })
    .unwrap_or_default();
    if sink.send(Message::Text(challenge.into())).await.is_err() {
        return;
    }
    let handshake = Duration::from_millis(gateway.config.handshake_timeout_ms());
    let first = tokio::select! {
        first = tokio::time::timeout(handshake, next_data(&mut stream)) => first,
        () = budget.exhausted.notified() => Ok(Some(Data::TooLarge)),
    };
    let first = match first {
        Err(_) => Err(Refused::close(1008, "handshake timeout")),
        Ok(Some(Data::TooLarge)) => Err(Refused::close(1009, "preauth payload too large")),
        Ok(None) => return,
        Ok(Some(Data::Binary(len))) if len > MAX_PREAUTH => {
            Err(Refused::close(1009, "preauth payload too large"))
        }
        Ok(Some(Data::Binary(_))) => Err(Refused::close(1008, "invalid-handshake")),
        Ok(Some(Data::Text(text))) if text.len() > MAX_PREAUTH => {
            Err(Refused::close(1009, "preauth payload too large"))
        }
        Ok(Some(Data::Text(text))) => Ok(text),
    };
    let (request_id, accepted) = match first {
        Ok(text) => match frames::parse_request(&text) {
            Ok(request) if request.method == "connect" => {
                let id = request.id.clone();
                (Some(id), connect(&gateway, peer, &request.params))
            }
            Ok(request) => (
                Some(request.id),
                Err(Refused {
                    error: Some(ErrorShape::invalid("the first request must be `connect`")),
                    code: 1008,
                    reason: "invalid-handshake",
                }),
            ),
            Err((id, message)) => (
                id,
                Err(Refused {
                    error: Some(ErrorShape::invalid(message)),
                    code: 1008,
                    reason: "invalid-handshake",
                }),
            ),
        },
        Err(refused) => (None, Err(refused)),
    };
    let (hello, scopes, caps, _slot, presence) = match accepted {
        Ok(accepted) => accepted,
        Err(refused) => {
            budget.drain();
            let refusal = async {
                if let (Some(id), Some(error)) = (&request_id, &refused.error) {
                    sink.send(Message::Text(frames::error(id, error).into()))
                        .await?;
                }
                sink.send(close(refused.code, refused.reason)).await
            };
            let _ = tokio::time::timeout(Duration::from_secs(2), refusal).await;
            drain(&mut stream, &budget).await;
            return;
        }
    };
    budget.authenticated();
    drop(preauth);
    let (outbox, inbox) = Outbox::new(gateway.config.max_buffered_bytes());
    let conn = Arc::new(Conn {
        id: gateway.hub.next_conn_id(),
        out: outbox.clone(),
        scopes,
        tool_events: caps.iter().any(|c| c == "tool-events"),
        scoped: caps.iter().any(|c| c == "session-scoped-events"),
        chat_deltas: caps
            .iter()
            .any(|c| c == crate::gateway::conn::CHAT_DELTAS_CAP),
        sessions: Default::default(),
        sessions_changed: Default::default(),
        presence,
    });
    // `hello-ok` leaves as text; the value it was built as (about 9 KB)
    // and the handshake's other values are dropped here, not held for
    // the connection's life by this function's state.
    {
        let mut hello = hello;
        // What a new session starts with comes from the config files: read
        // on the blocking pool, not on a worker that writes others' frames.
        let hub = gateway.hub.clone();
        hello.snapshot.session_defaults = crate::parallel::ANSWERS
            .run(move || hub.session_defaults())
            .await
            .ok();
        hello.server.conn_id = uuid::Uuid::new_v4().to_string();
        outbox.push(Out::Frame(frames::ok(
            &request_id.unwrap_or_default(),
            &hello,
        )));
        drop(caps);
    }
    gateway.hub.register(conn.clone());
    let slow = outbox.slow.clone();
    let writer = tokio::spawn(write(sink, inbox, slow));
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    let slow = outbox.slow.clone();
    loop {
        let message = tokio::select! {
            () = slow.cancelled() => break,
            message = stream.next() => message,
        };
        let text = match message {
            None | Some(Ok(Message::Close(_))) => break,
            Some(Err(error)) => {
                // A frame over the limit, or one that breaks the protocol:
                // the client hears why before the connection ends.
                let (code, reason) = match error {
                    WsError::Capacity(_) => (1009, "message too big"),
                    WsError::Protocol(_) | WsError::Utf8(_) => (1002, "protocol error"),
                    _ => break,
                };
                budget.drain();
                outbox.close(code, reason);
                break;
            }
            Some(Ok(Message::Text(text))) => text.to_string(),
            Some(Ok(Message::Binary(_))) => {
                let error = ErrorShape::invalid("binary frames are not accepted; send JSON text");
                outbox.push(Out::Frame(frames::error("invalid", &error)));
                continue;
            }
            Some(Ok(_)) => continue,
        };
        let request = match frames::parse_request(&text) {
            Ok(request) => request,
            Err((id, message)) => {
                let error = ErrorShape::invalid(message);
                let id = id.unwrap_or_else(|| "invalid".to_string());
                outbox.push(Out::Frame(frames::error(&id, &error)));
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            let mut error = ErrorShape::new(
                UNAVAILABLE,
                format!("more than {MAX_IN_FLIGHT} requests at once"),
            );
            error.retry_after_ms = Some(1000);
            outbox.push(Out::Frame(frames::error(&request.id, &error)));
            continue;
        };
        let hub = gateway.hub.clone();
        let conn = conn.clone();
        tokio::spawn(async move {
            super::methods::call(&hub, &conn, request).await;
            drop(permit);
        });
    }
    gateway.hub.unregister(conn.id);
    drop(outbox);
    drop(conn);
    // The writer sends what is queued (a last answer) and ends when every
    // outbox clone is gone; a client that stopped reading cannot hold it.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    if budget.is_draining() {
        drain(&mut stream, &budget).await;
    }
}

enum Data {
    Text(String),
    Binary(usize),
    /// More than the pre-auth budget arrived (see `guard`).
    TooLarge,
}

/// The next data frame (pings are answered by the websocket layer).
async fn next_data(stream: &mut futures::stream::SplitStream<Socket>) -> Option<Data> {
    loop {
        match stream.next().await? {
            Ok(Message::Text(text)) => return Some(Data::Text(text.to_string())),
            Ok(Message::Binary(bytes)) => return Some(Data::Binary(bytes.len())),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

/// The refusal of a `connect` whose `scopes` is not an array of strings.
fn bad_scopes() -> Refused {
    Refused {
        error: Some(ErrorShape::invalid(
            "invalid connect params: `scopes` must be an array of scope names (such as [\"operator.read\"]); leave it out for the credential's full authority",
        )),
        code: 1008,
        reason: "invalid-handshake",
    }
}

/// A `connect` taken: `hello-ok`, the scopes and caps granted, the
/// connection's slot, and what it said of itself.
type Accepted = (
    hello::HelloOk,
    Scopes,
    Vec<String>,
    Slot,
    Option<Box<Presence>>,
);

/// Checks a `connect`: rate limit, protocol, role, credential.
fn connect(gateway: &Gateway, peer: IpAddr, params: &Value) -> Result<Accepted, Refused> {
    let refuse = |error: ErrorShape, code: u16, reason: &'static str| Refused {
        error: Some(error),
        code,
        reason,
    };
    if let Some(wait) = gateway.limiter.locked(peer) {
        let mut error = ErrorShape::new(
            UNAVAILABLE,
            "unauthorized: too many failed attempts from this address; try again later",
        )
        .details(json!({"code": "AUTH_RATE_LIMITED"}));
        error.retry_after_ms = Some(wait.as_millis() as u64 + 1);
        return Err(refuse(error, 1008, "rate limited"));
    }
    let min = params["minProtocol"].as_u64();
    let max = params["maxProtocol"].as_u64();
    let fits = matches!((min, max), (Some(min), Some(max)) if min <= PROTOCOL && PROTOCOL <= max);
    if !fits {
        let error = ErrorShape::invalid("protocol mismatch").details(json!({
            "code": "PROTOCOL_MISMATCH",
            "clientMinProtocol": min,
            "clientMaxProtocol": max,
            "expectedProtocol": PROTOCOL,
        }));
        return Err(refuse(error, 1002, "protocol mismatch"));
    }
    let role = params["role"].as_str().unwrap_or("operator");
    if role != "operator" {
        let error = ErrorShape::invalid(format!(
            "invalid role `{role}`: pincer's gateway serves operators only"
        ));
        return Err(refuse(error, 1008, "invalid role"));
    }
    // Asking for no scopes is asking for the credential's full authority,
    // so a `scopes` that is not a list of names must not count as none: a
    // client that meant to narrow itself would get admin instead.
    let requested = match &params["scopes"] {
        Value::Null => Vec::new(),
        Value::Array(items) => match items
            .iter()
            .map(|v| v.as_str().map(String::from))
            .collect::<Option<Vec<String>>>()
        {
            Some(names) => names,
            None => return Err(bad_scopes()),
        },
        _ => return Err(bad_scopes()),
    };
    let credential = &gateway.credential;
    let offered = match credential.mode {
        crate::config::gateway::AuthMode::Token => params["auth"]["token"].as_str(),
        crate::config::gateway::AuthMode::Password => params["auth"]["password"].as_str(),
    };
    if let Err(refusal) = credential.check(offered) {
        gateway.limiter.failed(peer);
        tracing::info!(%peer, "refused a gateway client: {refusal:?}");
        let what = credential.mode.as_str();
        let (message, code) = match (refusal, credential.mode) {
            (Refusal::Missing, crate::config::gateway::AuthMode::Token) => {
                ("unauthorized: gateway token missing", "AUTH_TOKEN_MISSING")
            }
            (Refusal::Missing, _) => ("unauthorized: gateway password missing", "AUTH_REQUIRED"),
            (Refusal::Mismatch, crate::config::gateway::AuthMode::Token) => (
                "unauthorized: gateway token mismatch",
                "AUTH_TOKEN_MISMATCH",
            ),
            (Refusal::Mismatch, _) => (
                "unauthorized: gateway password mismatch",
                "AUTH_PASSWORD_MISMATCH",
            ),
        };
        let error = ErrorShape::new(INVALID_REQUEST, message).details(json!({
            "code": code,
            "authReason": format!("{what}_{}", if refusal == Refusal::Missing { "missing" } else { "mismatch" }),
        }));
        return Err(refuse(error, 1008, "unauthorized"));
    }
    gateway.limiter.succeeded(peer);
    let Some(slot) = gateway
        .authenticated
        .take(Some(super::peers::limit_key(peer)))
    else {
        let mut error = ErrorShape::new(
            UNAVAILABLE,
            "too many connections; close another client of this gateway or try again later",
        )
        .details(json!({"code": "TOO_MANY_CONNECTIONS"}));
        error.retry_after_ms = Some(1000);
        return Err(refuse(error, 1013, "try again later"));
    };
    let (scopes, granted) = Scopes::from_requested(&requested);
    let caps: Vec<String> = params["caps"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let config = &gateway.config;
    let hello = hello::HelloOk {
        kind: "hello-ok",
        protocol: PROTOCOL,
        server: hello::Server {
            version: format!("pincer {}", env!("CARGO_PKG_VERSION")),
            conn_id: String::new(),
            boot_id: gateway.hub.boot_id.clone(),
            control_ui_build_source: "configured",
        },
        features: hello::Features {
            methods: super::methods::advertised(),
            events: super::methods::EVENTS,
            capabilities: super::methods::CAPABILITIES,
        },
        snapshot: hello::Snapshot {
            presence: Vec::new(),
            health: hello::Health::default(),
            state_version: hello::StateVersion::default(),
            uptime_ms: gateway.hub.started.elapsed().as_millis() as u64,
            auth_mode: credential.mode.as_str(),
            session_defaults: None,
        },
        auth: hello::Grant {
            role: "operator",
            scopes: granted,
            method: credential.mode.as_str(),
        },
        policy: hello::Policy {
            max_payload: config.max_payload(),
            max_buffered_bytes: config.max_buffered_bytes(),
            tick_interval_ms: config.tick_interval_ms(),
        },
    };
    let presence = Presence::of(params, "operator", scopes, peer, now_ms());
    Ok((hello, scopes, caps, slot, presence))
}

/// Writes what is queued for a client to its socket, in batches (see
/// [`WRITE_BATCH`]), until the queue ends, a close is written, the
/// socket fails, or the client fell too far behind (`slow`).
async fn write<S>(mut sink: S, mut inbox: Inbox, slow: CancellationToken)
where
    S: futures::Sink<Message> + Unpin,
{
    let mut seq = 0u64;
    loop {
        let first = tokio::select! {
            () = slow.cancelled() => {
                let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(close(1008, "slow consumer"))).await;
                return;
            }
            out = inbox.rx.recv() => match out {
                Some(out) => out,
                None => return,
            },
        };
        // What else is queued by now leaves in the same write: on a
        // busy gateway a client's frames are one system call, not one
        // each.
        let mut queued = first.len();
        let mut batch = vec![first];
        while queued < WRITE_BATCH {
            match inbox.rx.try_recv() {
                Ok(out) => {
                    queued += out.len();
                    batch.push(out);
                }
                Err(_) => break,
            }
        }
        for out in batch {
            inbox.written(&out);
            // No allocation per frame but the frame's own text.
            let (first, second) = match out {
                Out::Frame(frame) => (Message::Text(frame.into()), None),
                Out::Event(name, payload) => {
                    seq += 1;
                    (
                        Message::Text(frames::event(name, &payload, seq).into()),
                        None,
                    )
                }
                Out::Text(text) => {
                    seq += 2;
                    (
                        Message::Text(frames::event("chat", &text.chat, seq - 1).into()),
                        Some(Message::Text(
                            frames::event("agent", &text.agent, seq).into(),
                        )),
                    )
                }
                Out::Close(code, reason) => {
                    let _ = tokio::time::timeout(Duration::from_secs(1), async {
                        let _ = sink.flush().await;
                        sink.send(close(code, reason)).await
                    })
                    .await;
                    return;
                }
            };
            for message in std::iter::once(first).chain(second) {
                if sink.feed(message).await.is_err() {
                    return;
                }
            }
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::conn::Text;

    fn piece(seq: u64, delta: &str) -> Out {
        let chat = json!({"runId": "r", "seq": seq, "state": "delta", "deltaText": delta});
        let agent =
            json!({"runId": "r", "seq": seq, "stream": "assistant", "data": {"delta": delta}});
        Out::Text(Box::new(Text {
            chat: Arc::from(chat.to_string()),
            agent: Arc::from(agent.to_string()),
        }))
    }

    #[tokio::test]
    async fn what_is_queued_leaves_in_order_with_consecutive_frame_numbers() {
        let (outbox, inbox) = Outbox::new(1 << 20);
        outbox.push(Out::Frame(r#"{"type":"res"}"#.into()));
        for (seq, delta) in [(1, "Hel"), (2, "lo "), (3, "world")] {
            outbox.push(piece(seq, delta));
        }
        outbox.push(Out::Event("tick", Arc::from(r#"{"ts":1}"#)));
        outbox.push(piece(4, "!"));
        outbox.close(1000, "bye");
        let (tx, rx) = futures::channel::mpsc::unbounded::<Message>();
        write(tx, inbox, outbox.slow.clone()).await;
        let sent: Vec<Message> = rx.collect().await;
        let texts: Vec<Value> = sent
            .iter()
            .filter_map(|m| match m {
                Message::Text(text) => Some(serde_json::from_str(text.as_str()).unwrap()),
                _ => None,
            })
            .collect();
        let shown: Vec<(String, String, u64)> = texts
            .iter()
            .map(|frame| {
                let payload = &frame["payload"];
                let text = payload["deltaText"]
                    .as_str()
                    .or(payload["data"]["delta"].as_str())
                    .unwrap_or_default();
                (
                    frame["event"].as_str().unwrap_or("res").to_string(),
                    text.to_string(),
                    frame["seq"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        // Every piece as its chat and agent events, in order, each frame
        // numbered; the close after them.
        let expected: Vec<(String, String, u64)> = [
            ("res", "", 0),
            ("chat", "Hel", 1),
            ("agent", "Hel", 2),
            ("chat", "lo ", 3),
            ("agent", "lo ", 4),
            ("chat", "world", 5),
            ("agent", "world", 6),
            ("tick", "", 7),
            ("chat", "!", 8),
            ("agent", "!", 9),
        ]
        .into_iter()
        .map(|(event, text, seq)| (event.to_string(), text.to_string(), seq))
        .collect();
        assert_eq!(shown, expected);
        assert!(
            matches!(sent.last(), Some(Message::Close(Some(frame))) if frame.code == 1000.into())
        );
    }
}
