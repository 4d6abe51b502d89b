//! ACP on the gateway's port: `ws(s)://host:port/acp`, the websocket
//! profile of ACP's remote transport (the "Streamable HTTP & WebSocket
//! Transport" RFD): one JSON-RPC message per text frame, binary frames
//! ignored, the connection's id in the upgrade's `Acp-Connection-Id`, and
//! `initialize` as the first message, as on stdio.
//!
//! The caller proves the gateway's credential in the upgrade request
//! itself (`Authorization: Bearer <token or password>`, as ACP's remote
//! security draft carries an access token), before any ACP message is
//! read: a missing or wrong one gets `401` with a Bearer challenge, and
//! wrong ones count towards the same lockout as the gateway's `connect`.
//! The connection then takes a place among the gateway's authenticated
//! clients for as long as it lives.
//!
//! Behind it is the same ACP server as `pincer acp`'s, over the gateway's
//! session table: the sessions it opens are the gateway's too (its clients
//! see them run), and it can load the gateway's. When the socket closes,
//! the requests it sent are finished and the sessions it owns end, as when
//! an editor's stdin closes.
//!
//! Frames become the lines the stdio transport reads
//! ([`crate::acp::transport::lines`]), so both transports share its
//! handling of bad input: a frame that is not JSON-RPC gets a parse error
//! and the connection goes on.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::auth::Refusal;
use super::{Gateway, peers};
use crate::acp::registry::Registry;
use crate::acp::transport::Drain;

/// Where ACP is served.
pub(super) const PATH: &str = "/acp";

/// The upgrade response's header naming the connection (the RFD's).
pub(super) const CONNECTION_ID: &str = "acp-connection-id";

/// Bytes of frames waiting for the ACP reader before the socket is read
/// again: a client that writes faster than pincer reads is held back here.
const INCOMING_BUFFER: usize = 256 * 1024;

/// Lines waiting for the socket: a client that does not read holds back
/// the writer (and so the server), not pincer's memory.
const OUTGOING_QUEUE: usize = 256;

/// The challenge of a `401`.
const CHALLENGE: &str = "Bearer realm=\"pincer gateway\"";

/// The credential an upgrade request offers: `Authorization: Bearer X`.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credential) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credential.trim())
        .filter(|c| !c.is_empty())
}

/// Checks an ACP upgrade request's credential; returns its place among the
/// authenticated clients, or the response that refuses it.
pub(super) fn admit(
    gateway: &Gateway,
    client: std::net::IpAddr,
    headers: &HeaderMap,
) -> Result<peers::Slot, Box<Response>> {
    if let Some(wait) = gateway.limiter.locked(client) {
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed attempts; try again later\n",
        )
            .into_response();
        if let Ok(value) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return Err(Box::new(response));
    }
    if let Err(refusal) = gateway.credential.check(bearer(headers)) {
        let message = match refusal {
            Refusal::Missing => {
                "ACP on /acp needs the gateway's credential: send `Authorization: Bearer <token>` (or the password, with auth = \"password\") with the upgrade\n"
            }
            Refusal::Mismatch => {
                gateway.limiter.failed(client);
                tracing::warn!(%client, "refused an ACP connection with a wrong credential");
                "the gateway's credential does not match\n"
            }
        };
        let mut response = (StatusCode::UNAUTHORIZED, message).into_response();
        let challenge = match refusal {
            Refusal::Missing => CHALLENGE.to_string(),
            Refusal::Mismatch => format!("{CHALLENGE}, error=\"invalid_token\""),
        };
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        return Err(Box::new(response));
    }
    gateway.limiter.succeeded(client);
    gateway
        .authenticated
        .take(Some(peers::limit_key(client)))
        .ok_or_else(|| {
            tracing::debug!(%client, "too many clients; refused an ACP connection");
            Box::new(
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many connections; try again later\n",
                )
                    .into_response(),
            )
        })
}

/// What a request to `/acp` that is not a websocket upgrade gets: this
/// gateway serves ACP's websocket profile only (the RFD lets a server
/// offer just that one).
pub(super) fn not_websocket() -> Response {
    let mut response = (
        StatusCode::UPGRADE_REQUIRED,
        "ACP is served here over a websocket (GET /acp with Upgrade: websocket and Authorization: Bearer <token>); the streamable HTTP profile is not offered\n",
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    response
}

/// A text frame as one line for the ACP reader. JSON may hold line breaks
/// between its tokens (a pretty-printed message); such a frame is written
/// compact, and one that is not JSON has its breaks turned into spaces, so
/// that it stays one line (and gets one parse error).
fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(['\n', '\r']) {
        return std::borrow::Cow::Borrowed(text);
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => std::borrow::Cow::Owned(value.to_string()),
        Err(_) => std::borrow::Cow::Owned(text.replace(['\n', '\r'], " ")),
    }
}

/// Lines the ACP writer produces, handed to the socket one message a
/// frame. It runs on the writer's own thread, so it may block.
struct Frames {
    out: tokio::sync::mpsc::Sender<String>,
    partial: Vec<u8>,
}

impl std::io::Write for Frames {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            let line = String::from_utf8(std::mem::take(&mut self.partial))
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            self.out
                .blocking_send(line)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        }
        self.partial.extend_from_slice(rest);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Serves ACP on an upgraded socket until either side ends it.
pub(super) async fn serve<S>(
    socket: WebSocketStream<S>,
    registry: Arc<Registry>,
    model: Option<String>,
    cwd: std::path::PathBuf,
    max_sessions: usize,
    slot: peers::Slot,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut frames) = socket.split();
    let (reader, mut incoming) = tokio::io::duplex(INCOMING_BUFFER);
    let (out, mut lines) = tokio::sync::mpsc::channel::<String>(OUTGOING_QUEUE);
    let drain = Drain::new();
    let transport = crate::acp::transport::lines(
        reader,
        Frames {
            out,
            partial: Vec::new(),
        },
        drain.clone(),
    );
    let options = crate::acp::ServeOptions {
        model,
        registry: Some(registry),
        observed: false,
        gateway_cwd: Some(cwd),
        max_sessions: Some(max_sessions),
    };
    let mut served = tokio::spawn(crate::acp::serve(transport, drain, options));
    let writer = tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            if sink.send(Message::text(line)).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    let read = async {
        while let Some(frame) = frames.next().await {
            let text = match frame {
                Ok(Message::Text(text)) => text,
                // The RFD: binary frames carry nothing.
                Ok(
                    Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_),
                ) => {
                    continue;
                }
                Ok(Message::Close(_)) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "an ACP socket failed");
                    break;
                }
            };
            let line = one_line(text.as_str());
            if incoming.write_all(line.as_bytes()).await.is_err()
                || incoming.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        // The end of its input: the server finishes what it was asked.
        drop(incoming);
        std::future::pending::<()>().await;
    };
    tokio::select! {
        result = &mut served => log_end(result),
        () = read => {}
    }
    if !served.is_finished() {
        log_end(served.await);
    }
    let _ = writer.await;
    drop(slot);
}

fn log_end(result: Result<Result<(), agent_client_protocol::Error>, tokio::task::JoinError>) {
    match result {
        Ok(Ok(())) => tracing::debug!("an ACP connection ended"),
        Ok(Err(e)) => tracing::debug!(error = %e, "an ACP connection ended with an error"),
        Err(e) => tracing::warn!(error = %e, "an ACP connection's server failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_is_read_from_a_bearer_authorization_only() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  abc "),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn a_frame_becomes_one_line() {
        assert_eq!(one_line(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(one_line("{\n  \"a\": \"x\\ny\"\n}"), r#"{"a":"x\ny"}"#);
        assert_eq!(one_line("not\njson"), "not json");
    }

    #[test]
    fn lines_written_in_any_pieces_go_out_one_per_frame() {
        use std::io::Write;
        let (out, mut lines) = tokio::sync::mpsc::channel(8);
        let mut frames = Frames {
            out,
            partial: Vec::new(),
        };
        frames.write_all(b"{\"a\":1}\n{\"b\"").unwrap();
        frames.write_all(b":2}\n").unwrap();
        assert_eq!(lines.try_recv().unwrap(), r#"{"a":1}"#);
        assert_eq!(lines.try_recv().unwrap(), r#"{"b":2}"#);
        assert!(lines.try_recv().is_err());
        drop(lines);
        assert_eq!(
            frames.write_all(b"x\n").unwrap_err().kind(),
            std::io::ErrorKind::BrokenPipe
        );
    }
}
