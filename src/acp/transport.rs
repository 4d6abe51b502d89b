//! The stdio transport of `pincer acp`, with two behaviours scripts rely on.
//!
//! 1. Requests may be written without waiting for answers (`printf
//!    'initialize…\nsession/new…\n' | pincer acp`). The ACP crate rejects any
//!    request that arrives before the `initialize` answer has gone out, so
//!    after an `initialize` request this transport holds back the following
//!    lines until that answer has been written.
//! 2. When stdin closes, pincer still finishes every request it has already
//!    received: the incoming stream stays open (without new lines) until each
//!    of those requests has been answered on stdout, and [`Drain::closed`]
//!    tells the rest of the server that the editor can no longer answer
//!    questions (a pending permission counts as rejected).
//!
//! Only whole JSON-RPC lines are written to stdout, each flushed at once.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::{Sink, Stream};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Shared state between the transport and the server.
#[derive(Debug, Default)]
pub struct Drain {
    /// Cancelled once stdin has reached its end.
    stdin_closed: CancellationToken,
    state: Mutex<DrainState>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct DrainState {
    /// Ids (as JSON text) of received requests not yet answered.
    unanswered: HashSet<String>,
    /// The id of an `initialize` request whose answer has not gone out.
    initializing: Option<String>,
}

/// Just enough of a JSON-RPC message to route it.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
}

impl Drain {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Resolves when stdin has closed: the editor is gone.
    pub fn closed(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.stdin_closed.cancelled()
    }

    pub fn is_closed(&self) -> bool {
        self.stdin_closed.is_cancelled()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DrainState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn on_incoming(&self, line: &str) {
        let Ok(envelope) = serde_json::from_str::<Envelope>(line) else {
            return;
        };
        if let (Some(id), Some(method)) = (envelope.id, envelope.method) {
            let id = id.to_string();
            let mut state = self.lock();
            if method == "initialize" {
                state.initializing = Some(id.clone());
            }
            state.unanswered.insert(id);
        }
    }

    fn on_outgoing(&self, line: &str) {
        // Requests and notifications carry a `"method":` key; inside JSON
        // strings the quotes would be escaped, so a line without it is a
        // response. Only those need parsing, which keeps streaming cheap.
        if line.contains("\"method\":") {
            return;
        }
        let Ok(Envelope {
            id: Some(id),
            method: None,
        }) = serde_json::from_str::<Envelope>(line)
        else {
            return;
        };
        let id = id.to_string();
        let mut state = self.lock();
        state.unanswered.remove(&id);
        if state.initializing.as_deref() == Some(id.as_str()) {
            state.initializing = None;
        }
        drop(state);
        self.changed.notify_waiters();
    }

    async fn wait_until(&self, ready: impl Fn(&DrainState) -> bool) {
        loop {
            let notified = self.changed.notified();
            if ready(&self.lock()) {
                return;
            }
            notified.await;
        }
    }
}

type LineStream = Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;
type LineSink = Pin<Box<dyn Sink<String, Error = std::io::Error> + Send>>;

/// The transport over any reader and writer (stdin/stdout in production).
pub fn lines<R, W>(
    reader: R,
    writer: W,
    drain: Arc<Drain>,
) -> agent_client_protocol::Lines<LineSink, LineStream>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let incoming = futures::stream::unfold(
        (BufReader::new(reader), drain.clone()),
        |(mut reader, drain)| async move {
            drain.wait_until(|s| s.initializing.is_none()).await;
            let mut line = String::new();
            match reader.read_line(&mut line).await {
                Ok(0) => {
                    drain.stdin_closed.cancel();
                    tracing::debug!("stdin closed; finishing the requests already received");
                    drain.wait_until(|s| s.unanswered.is_empty()).await;
                    None
                }
                Ok(_) => {
                    let line = line.trim_end_matches(['\n', '\r']).to_string();
                    drain.on_incoming(&line);
                    Some((Ok(line), (reader, drain)))
                }
                Err(error) => {
                    drain.stdin_closed.cancel();
                    Some((Err(error), (reader, drain)))
                }
            }
        },
    );
    let outgoing = futures::sink::unfold(
        (writer, drain),
        |(mut writer, drain), line: String| async move {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            writer.write_all(&bytes).await?;
            writer.flush().await?;
            bytes.pop();
            drain.on_outgoing(std::str::from_utf8(&bytes).unwrap_or_default());
            Ok::<_, std::io::Error>((writer, drain))
        },
    );
    agent_client_protocol::Lines::new(
        Box::pin(outgoing) as LineSink,
        Box::pin(incoming) as LineStream,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_release_the_initialize_gate_and_the_drain() {
        let drain = Drain::new();
        drain.on_incoming(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#);
        drain.on_incoming(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#);
        assert_eq!(drain.lock().initializing.as_deref(), Some("0"));
        assert_eq!(drain.lock().unanswered.len(), 1);
        drain.on_outgoing(r#"{"jsonrpc":"2.0","method":"session/update","params":{"id":0}}"#);
        assert_eq!(drain.lock().initializing.as_deref(), Some("0"));
        drain.on_outgoing(r#"{"jsonrpc":"2.0","id":0,"result":{"text":"\"method\": no"}}"#);
        assert_eq!(drain.lock().initializing, None);
        assert!(drain.lock().unanswered.is_empty());
    }

    #[test]
    fn string_and_number_ids_are_kept_apart() {
        let drain = Drain::new();
        drain.on_incoming(r#"{"jsonrpc":"2.0","id":"1","method":"session/prompt"}"#);
        drain.on_outgoing(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(drain.lock().unanswered.len(), 1);
        drain.on_outgoing(r#"{"jsonrpc":"2.0","id":"1","result":{}}"#);
        assert!(drain.lock().unanswered.is_empty());
    }
}
