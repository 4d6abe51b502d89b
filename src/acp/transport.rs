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
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Shared state between the transport and the server.
#[derive(Debug, Default)]
pub struct Drain {
    /// Cancelled once stdin has reached its end.
    stdin_closed: CancellationToken,
    state: Mutex<DrainState>,
    changed: Notify,
    /// The stdout writer's queue, for blocks of lines serialised by the
    /// server itself (a `session/load` replay).
    outgoing: std::sync::OnceLock<tokio::sync::mpsc::WeakSender<String>>,
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

    /// Queues lines for stdout behind everything already queued, bypassing
    /// the ACP crate's per-message path: replaying a long session sends
    /// thousands of notifications, and serialising them in blocks here is
    /// several times cheaper. `block` holds whole JSON-RPC notifications,
    /// each ending in a newline. Returns false when stdout is gone.
    pub async fn send_lines(&self, mut block: String) -> bool {
        if block.ends_with('\n') {
            block.pop();
        }
        match self.outgoing.get().and_then(|tx| tx.upgrade()) {
            Some(tx) => tx.send(block).await.is_ok(),
            None => false,
        }
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

/// Lines waiting for the writer; a full queue makes the sender wait, so a
/// slow reader on the other end of stdout cannot make pincer's memory grow.
const OUTGOING_QUEUE: usize = 1024;

/// Writes queued lines on a thread of its own: every line that is waiting
/// goes out in one write and one flush. (Handing each line to tokio's
/// blocking pool cost more CPU than everything else pincer does per
/// streamed token.)
fn write_lines(
    rx: &mut tokio::sync::mpsc::Receiver<String>,
    mut writer: impl std::io::Write,
    drain: &Drain,
) {
    let mut batch: Vec<String> = Vec::with_capacity(64);
    let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < OUTGOING_QUEUE {
            match rx.try_recv() {
                Ok(line) => batch.push(line),
                Err(_) => break,
            }
        }
        buffer.clear();
        for line in &batch {
            buffer.extend_from_slice(line.as_bytes());
            buffer.push(b'\n');
        }
        if let Err(e) = writer.write_all(&buffer).and_then(|()| writer.flush()) {
            tracing::debug!(error = %e, "stdout is closed");
            return;
        }
        for line in batch.drain(..) {
            drain.on_outgoing(&line);
        }
    }
}

/// The transport over any reader and writer (stdin/stdout in production).
/// The writer is driven by a thread of its own.
pub fn lines<R, W>(
    reader: R,
    writer: W,
    drain: Arc<Drain>,
) -> agent_client_protocol::Lines<LineSink, LineStream>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: std::io::Write + Send + 'static,
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
    let (lines_tx, mut lines_rx) = tokio::sync::mpsc::channel::<String>(OUTGOING_QUEUE);
    // Weak, so that the writer thread still ends when the connection drops
    // its sink. A second `lines` on the same drain (never done) would keep
    // the first.
    let _ = drain.outgoing.set(lines_tx.downgrade());
    let writer = std::thread::Builder::new()
        .name("pincer-stdout".to_string())
        .spawn(move || write_lines(&mut lines_rx, writer, &drain));
    if let Err(e) = writer {
        tracing::error!(error = %e, "cannot start the stdout writer thread");
    }
    let outgoing = futures::sink::unfold(lines_tx, |tx, line: String| async move {
        tx.send(line)
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdout is closed"))?;
        Ok::<_, std::io::Error>(tx)
    });
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
