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
//!    questions (a pending permission counts as rejected). When nobody
//!    reads stdout any more either (the editor is gone, not just done
//!    writing), nothing is waited for: the connection ends at once.
//!
//!
//! Neither behaviour may let one bad line stall or end the server: the
//! bookkeeping counts only lines the ACP crate itself takes for requests (it
//! answers an invalid one with `"id": null`, which would otherwise never
//! release the gate or the drain), a line that is not UTF-8 or longer than
//! [`MAX_LINE`] is answered here with a parse error instead of ending the
//! connection, and a read error on stdin counts as its end.
//!
//! Only whole JSON-RPC lines are written to stdout, each flushed at once.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use agent_client_protocol::{RawJsonRpcId, RawJsonRpcMessage, TransportFrame};
use futures::{Sink, Stream};
use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Shared state between the transport and the server.
#[derive(Debug, Default)]
pub struct Drain {
    /// Cancelled once stdin has reached its end.
    stdin_closed: CancellationToken,
    /// Cancelled once stdout cannot be written: its reader is gone.
    stdout_gone: CancellationToken,
    state: Mutex<DrainState>,
    changed: Notify,
    /// The stdout writer's queue, for blocks of lines serialised by the
    /// server itself (a `session/load` replay).
    outgoing: std::sync::OnceLock<tokio::sync::mpsc::WeakSender<String>>,
}

#[derive(Debug, Default)]
struct DrainState {
    /// Received requests not yet answered, counted per id: an editor may
    /// (wrongly) reuse an id, and each of those requests gets its answer.
    unanswered: HashMap<RawJsonRpcId, usize>,
    /// The id of an `initialize` request whose answer has not gone out.
    initializing: Option<RawJsonRpcId>,
    /// Handlers still sending what follows their answer ([`Drain::hold`]).
    holds: usize,
}

impl DrainState {
    /// Every request received is answered and nothing follows an answer.
    fn finished(&self) -> bool {
        self.unanswered.is_empty() && self.holds == 0
    }
}

/// While it lives, the end of stdin does not end pincer: what a handler
/// sends after its answer (a new session's slash commands) is queued
/// before the connection closes. One made by [`Drain::hold_until_written`]
/// lasts until what was queued before its end has been written: its end
/// is a marker queued behind it ([`HELD`]), which the writer drops.
pub struct Hold {
    drain: Arc<Drain>,
    cx: Option<agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(cx) = self.cx.take()
            && let Ok(marker) =
                agent_client_protocol::UntypedMessage::new(HELD, serde_json::json!({}))
            && cx.send_notification(marker).is_ok()
        {
            return;
        }
        self.drain.released();
    }
}

/// The method of the marker that ends a [`Hold`] once the writer reaches
/// it; never written to stdout.
const HELD: &str = "_pincer/held";

/// Whether an outgoing line is a [`HELD`] marker. (Inside a JSON string
/// the quotes would be escaped, so text cannot look like one.) Every line
/// pincer writes passes here: a marker is short (about 55 bytes), so the
/// streamed updates, all longer, are not searched.
fn is_held_marker(line: &str) -> bool {
    line.len() <= MARKER_MAX && line.contains("\"method\":\"_pincer/held\"")
}

/// The longest a [`HELD`] marker line is.
const MARKER_MAX: usize = 80;

/// Just enough of an outgoing JSON-RPC message to see which request it
/// answers.
#[derive(Deserialize)]
struct Envelope {
    /// `Some(Null)` for `"id": null`, which a request may carry too.
    #[serde(default, deserialize_with = "present")]
    id: Option<RawJsonRpcId>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<RawJsonRpcId>, D::Error> {
    RawJsonRpcId::deserialize(d).map(Some)
}

/// A broken response (no method, a result or an error): JSON-RPC answers
/// nothing to it, and neither does the crate.
fn is_response_shaped(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|value| {
        value.as_object().is_some_and(|object| {
            !object.contains_key("method")
                && (object.contains_key("result") || object.contains_key("error"))
        })
    })
}

/// The longest line pincer reads. A prompt with a few images is a few
/// megabytes; a line without an end must not grow pincer's memory without
/// bound, so a longer one is skipped and answered with a parse error.
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// One read from stdin.
#[derive(Debug, PartialEq)]
pub(crate) enum Read {
    Line(String),
    /// Not UTF-8, so not JSON: answered here, the crate never sees it.
    NotUtf8,
    /// Longer than [`MAX_LINE`]; the rest up to its newline was skipped.
    TooLong,
    End,
}

/// Reads one line of at most `limit` bytes, without its line ending.
pub(crate) async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    buffer: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Read> {
    buffer.clear();
    let read = (&mut *reader)
        .take(limit as u64 + 1)
        .read_until(b'\n', buffer)
        .await?;
    if read == 0 {
        return Ok(Read::End);
    }
    if buffer.last() == Some(&b'\n') {
        buffer.pop();
        if buffer.last() == Some(&b'\r') {
            buffer.pop();
        }
    } else if buffer.len() > limit {
        // Skip the rest of this line without keeping it.
        loop {
            let available = reader.fill_buf().await?;
            if available.is_empty() {
                break;
            }
            match available.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    reader.consume(end + 1);
                    break;
                }
                None => {
                    let len = available.len();
                    reader.consume(len);
                }
            }
        }
        return Ok(Read::TooLong);
    }
    match String::from_utf8(std::mem::take(buffer)) {
        Ok(line) => Ok(Read::Line(line)),
        Err(e) => {
            *buffer = e.into_bytes();
            Ok(Read::NotUtf8)
        }
    }
}

/// The parse error (-32700) for a line pincer could not read as text. The
/// id is null, as JSON-RPC 2.0 requires when the request could not be read.
fn parse_error_line(reason: &str) -> String {
    let error =
        agent_client_protocol::Error::parse_error().data(serde_json::json!({ "message": reason }));
    serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": error }).to_string()
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

    /// Whether [`Drain::send_lines`] reaches a writer: only a transport
    /// made by [`lines`] has one.
    pub fn writes_lines(&self) -> bool {
        self.outgoing.get().is_some()
    }

    /// A sender of whole lines to stdout, for a blocking thread that
    /// streams many (a session's replay, with `blocking_send`): blocks as
    /// [`Drain::send_lines`] takes them, without their last newline.
    pub fn line_sender(&self) -> Option<tokio::sync::mpsc::Sender<String>> {
        self.outgoing.get().and_then(|tx| tx.upgrade())
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

    /// Nobody reads stdout any more: answers cannot arrive, so nothing is
    /// waited for, and the editor counts as gone.
    fn stdout_gone(&self) {
        self.stdin_closed.cancel();
        self.stdout_gone.cancel();
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, DrainState> {
        self.state.lock()
    }

    fn on_incoming(&self, line: &str) {
        // Parsed exactly as the crate will parse it: a request gets an
        // answer carrying its id, and a line that is neither a request, a
        // notification nor a response gets an error with a null id.
        let id = match TransportFrame::parse_json(line) {
            TransportFrame::Single(RawJsonRpcMessage::Request(request)) => {
                if &*request.method == "initialize" {
                    self.lock().initializing = Some(request.id.clone());
                }
                request.id
            }
            TransportFrame::Single(_) => return,
            _ if is_response_shaped(line) => return,
            _ => RawJsonRpcId::Null,
        };
        self.expect_answer(id);
    }

    /// Keeps pincer from ending at the end of stdin until the [`Hold`] is
    /// dropped. Taken before a handler answers, so that the answer going
    /// out cannot let pincer end before what follows it is queued.
    pub fn hold(self: &Arc<Self>) -> Hold {
        self.lock().holds += 1;
        Hold {
            drain: self.clone(),
            cx: None,
        }
    }

    /// [`Drain::hold`] that ends only once what `cx` queued before its end
    /// has been written to stdout.
    pub fn hold_until_written(
        self: &Arc<Self>,
        cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>,
    ) -> Hold {
        let mut hold = self.hold();
        // Only this module's writer drops the markers: on another
        // transport (the gateway's in-process connection) the hold ends
        // when dropped, as a plain one.
        if self.outgoing.get().is_some() {
            hold.cx = Some(cx.clone());
        }
        hold
    }

    /// A hold ended.
    fn released(&self) {
        {
            let mut state = self.lock();
            state.holds = state.holds.saturating_sub(1);
        }
        self.changed.notify_waiters();
    }

    /// Counts an answer that must go out before pincer may end.
    fn expect_answer(&self, id: RawJsonRpcId) {
        *self.lock().unanswered.entry(id).or_default() += 1;
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
        let mut state = self.lock();
        if let Some(count) = state.unanswered.get_mut(&id) {
            *count -= 1;
            if *count == 0 {
                state.unanswered.remove(&id);
            }
        }
        if state.initializing.as_ref() == Some(&id) {
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

/// Writes queued lines on a thread of its own: the lines that are waiting
/// go out together (in writes of about 64 KiB) with one flush. (Handing each line to tokio's
/// blocking pool cost more CPU than everything else pincer does per
/// streamed token.)
fn write_lines(
    rx: &mut tokio::sync::mpsc::Receiver<String>,
    mut writer: impl std::io::Write,
    drain: &Drain,
) {
    let mut batch: Vec<String> = Vec::with_capacity(64);
    let mut buffer: Vec<u8> = Vec::with_capacity(WRITE_BUFFER);
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < OUTGOING_QUEUE {
            match rx.try_recv() {
                Ok(line) => batch.push(line),
                Err(_) => break,
            }
        }
        let before = batch.len();
        batch.retain(|line| !is_held_marker(line));
        let markers = before - batch.len();
        if let Err(e) = write_batch(&batch, &mut buffer, &mut writer) {
            tracing::debug!(error = %e, "stdout is closed");
            drain.stdout_gone();
            return;
        }
        for line in batch.drain(..) {
            drain.on_outgoing(&line);
        }
        for _ in 0..markers {
            drain.released();
        }
    }
}

/// Lines are gathered into writes of about this size.
const WRITE_BUFFER: usize = 64 * 1024;

/// Writes `lines`, each followed by a newline, gathering short ones in
/// `buffer` and writing long ones (a replay's blocks of lines) as they
/// are: copying them would cost as much as writing them, and the buffer,
/// kept for the next batch, would stay as large as the largest batch.
fn write_batch(
    lines: &[String],
    buffer: &mut Vec<u8>,
    writer: &mut impl std::io::Write,
) -> std::io::Result<()> {
    buffer.clear();
    for line in lines {
        if !buffer.is_empty() && buffer.len() + line.len() >= WRITE_BUFFER {
            writer.write_all(buffer)?;
            buffer.clear();
        }
        if line.len() >= WRITE_BUFFER {
            writer.write_all(line.as_bytes())?;
        } else {
            buffer.extend_from_slice(line.as_bytes());
        }
        buffer.push(b'\n');
    }
    writer.write_all(buffer)?;
    writer.flush()
}

/// The transport over the process's stdin and stdout.
pub fn stdio(drain: Arc<Drain>) -> agent_client_protocol::Lines<LineSink, LineStream> {
    #[cfg(unix)]
    watch_hangup(drain.clone());
    lines(tokio::io::stdin(), std::io::stdout(), drain)
}

/// Tells the drain as soon as nobody reads stdout (the write end of a pipe
/// reports an error once its reading end is closed, a terminal a hangup),
/// rather than at the next write, which may be minutes away while a turn
/// waits on a model. A stdout that has no reader to lose (a file,
/// /dev/null) never reports either. The watching thread sleeps in `poll`
/// and ends with the process.
#[cfg(unix)]
fn watch_hangup(drain: Arc<Drain>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let watch = move || {
        let stdout = std::io::stdout();
        loop {
            // No events asked for: errors and hangups are always reported.
            let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
            match poll(&mut fds, PollTimeout::NONE) {
                Err(nix::errno::Errno::EINTR) => continue,
                Err(error) => {
                    tracing::debug!(%error, "stdout cannot be watched for its reader going away");
                    return;
                }
                Ok(_) => {}
            }
            let events = fds[0].revents().unwrap_or_else(PollFlags::empty);
            if events.intersects(PollFlags::POLLERR | PollFlags::POLLHUP) {
                tracing::debug!("nobody reads stdout any more");
                drain.stdout_gone();
                return;
            }
            if events.contains(PollFlags::POLLNVAL) {
                return;
            }
        }
    };
    if let Err(error) = std::thread::Builder::new()
        .name("pincer-stdout-watch".to_string())
        .spawn(watch)
    {
        tracing::debug!(%error, "cannot start the stdout watcher");
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
        (BufReader::new(reader), drain.clone(), Vec::new()),
        |(mut reader, drain, mut buffer)| async move {
            let gone = drain.stdout_gone.clone();
            tokio::select! {
                () = drain.wait_until(|s| s.initializing.is_none()) => {}
                () = gone.cancelled() => return None,
            }
            loop {
                let read = tokio::select! {
                    read = read_line(&mut reader, &mut buffer, MAX_LINE) => read,
                    () = gone.cancelled() => return None,
                };
                let reason = match read {
                    Ok(Read::Line(line)) => {
                        drain.on_incoming(&line);
                        return Some((Ok(line), (reader, drain, buffer)));
                    }
                    Ok(Read::NotUtf8) => "the line is not valid UTF-8".to_string(),
                    Ok(Read::TooLong) => format!("the line is longer than {MAX_LINE} bytes"),
                    Ok(Read::End) => break,
                    Err(error) => {
                        // The crate would end the connection on an error;
                        // stdin that cannot be read is stdin that ended.
                        tracing::warn!(%error, "cannot read stdin; treating it as closed");
                        break;
                    }
                };
                tracing::debug!(%reason, "answering an unreadable line with a parse error");
                drain.expect_answer(RawJsonRpcId::Null);
                if !drain.send_lines(parse_error_line(&reason)).await {
                    break;
                }
            }
            drain.stdin_closed.cancel();
            tracing::debug!("stdin closed; finishing the requests already received");
            tokio::select! {
                () = drain.wait_until(DrainState::finished) => {}
                () = gone.cancelled() => {
                    tracing::debug!("stdout is closed too; not waiting for the answers");
                }
            }
            None
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
    /// A writer that keeps what it was given and each write's size.
    #[derive(Default)]
    struct Recorded {
        bytes: Vec<u8>,
        writes: Vec<usize>,
    }

    impl std::io::Write for Recorded {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.bytes.extend_from_slice(data);
            self.writes.push(data.len());
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_batch_goes_out_in_order_and_the_buffer_stays_small() {
        use super::{WRITE_BUFFER, write_batch};
        let block =
            |c: char| std::iter::repeat_n(c.to_string(), 3 * WRITE_BUFFER / 2).collect::<String>();
        let lines: Vec<String> = vec![
            "short one".into(),
            block('a'),
            "short two".into(),
            "short three".into(),
            block('b'),
            block('c'),
        ];
        let mut buffer = Vec::with_capacity(WRITE_BUFFER);
        let mut out = Recorded::default();
        write_batch(&lines, &mut buffer, &mut out).unwrap();
        let expected: String = lines.iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(out.bytes, expected.as_bytes());
        // The long lines were written as they are, not copied into the
        // buffer, which kept its size.
        assert!(buffer.capacity() <= WRITE_BUFFER, "{}", buffer.capacity());
        assert!(
            out.writes
                .iter()
                .filter(|w| **w == 3 * WRITE_BUFFER / 2)
                .count()
                == 3,
            "{:?}",
            out.writes
        );
        // Short lines still go out together.
        let shorts: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
        let mut out = Recorded::default();
        write_batch(&shorts, &mut buffer, &mut out).unwrap();
        assert_eq!(out.writes.len(), 1);
    }

    use super::*;

    fn id(n: i64) -> Option<RawJsonRpcId> {
        Some(RawJsonRpcId::Number(n))
    }

    #[test]
    fn responses_release_the_initialize_gate_and_the_drain() {
        let drain = Drain::new();
        drain.on_incoming(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#);
        drain.on_incoming(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#);
        assert_eq!(drain.lock().initializing, id(0));
        assert_eq!(drain.lock().unanswered.len(), 1);
        drain.on_outgoing(r#"{"jsonrpc":"2.0","method":"session/update","params":{"id":0}}"#);
        assert_eq!(drain.lock().initializing, id(0));
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

    #[test]
    fn a_null_id_is_an_id() {
        let drain = Drain::new();
        drain.on_incoming(r#"{"jsonrpc":"2.0","id":null,"method":"session/list","params":{}}"#);
        assert_eq!(drain.lock().unanswered.len(), 1);
        drain.on_outgoing(r#"{"jsonrpc":"2.0","id":null,"result":{"sessions":[]}}"#);
        assert!(drain.lock().unanswered.is_empty());
    }

    #[test]
    fn a_reused_id_waits_for_both_answers() {
        let drain = Drain::new();
        let line = r#"{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}"#;
        drain.on_incoming(line);
        drain.on_incoming(line);
        drain.on_outgoing(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        assert_eq!(
            drain.lock().unanswered.get(&RawJsonRpcId::Number(3)),
            Some(&1)
        );
        drain.on_outgoing(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        assert!(drain.lock().unanswered.is_empty());
    }

    /// The crate answers these with `"id": null`, so they must not hold
    /// back the next line, and only that answer is waited for.
    #[test]
    fn lines_the_crate_rejects_wait_for_a_null_id_answer() {
        for line in [
            r#"{"id":0,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"1.0","id":0,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"initialize"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":"x"}"#,
            r#"[{"jsonrpc":"2.0","id":2,"method":"initialize","params":{}}]"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"x","result":{}}"#,
            "not json",
        ] {
            let drain = Drain::new();
            drain.on_incoming(line);
            assert_eq!(drain.lock().initializing, None, "{line}");
            assert_eq!(
                drain.lock().unanswered,
                HashMap::from([(RawJsonRpcId::Null, 1)]),
                "{line}"
            );
            drain.on_outgoing(
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}"#,
            );
            assert!(drain.lock().unanswered.is_empty(), "{line}");
        }
        // Responses, even broken ones, and notifications get no answer.
        let drain = Drain::new();
        for line in [
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
            r#"{"id":1.5,"error":{}}"#,
            r#"{"result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#,
        ] {
            drain.on_incoming(line);
            assert!(drain.lock().unanswered.is_empty(), "{line}");
        }
        drain.on_incoming(r#"{"jsonrpc":"2.0","id":-5,"method":"initialize","x":1}"#);
        assert_eq!(drain.lock().initializing, id(-5));
    }

    #[test]
    fn only_a_hold_s_own_marker_is_taken_for_one() {
        assert!(is_held_marker(
            r#"{"jsonrpc":"2.0","method":"_pincer/held","params":{}}"#
        ));
        // Text that quotes it is escaped; a long line is never one.
        assert!(!is_held_marker(
            r#"{"jsonrpc":"2.0","method":"x","params":{"t":"\"method\":\"_pincer/held\""}}"#
        ));
        let long = format!(
            r#"{{"jsonrpc":"2.0","method":"_pincer/held","params":{{"pad":"{}"}}}}"#,
            "x".repeat(100)
        );
        assert!(!is_held_marker(&long));
        assert!(!is_held_marker(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    }

    #[tokio::test]
    async fn a_hold_keeps_pincer_from_finishing_until_it_is_dropped() {
        let drain = Drain::new();
        drain.on_incoming(r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}"#);
        let hold = drain.hold();
        // The answer goes out; what follows it is still being sent.
        drain.on_outgoing(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}"#);
        let waiting = tokio::spawn({
            let drain = drain.clone();
            async move { drain.wait_until(DrainState::finished).await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "finished while a handler held it");
        drop(hold);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
    }

    async fn reads(input: &[u8], limit: usize) -> Vec<Read> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut buffer = Vec::new();
        let mut out = Vec::new();
        loop {
            let read = read_line(&mut reader, &mut buffer, limit).await.unwrap();
            if read == Read::End {
                return out;
            }
            out.push(read);
        }
    }

    #[tokio::test]
    async fn lines_that_are_not_text_or_too_long_are_told_apart() {
        let input = b"{\"a\":1}\r\n\xff\xfe\nabcdefghijkl\n\nlast";
        assert_eq!(
            reads(input, 8).await,
            vec![
                Read::Line("{\"a\":1}".to_string()),
                Read::NotUtf8,
                Read::TooLong,
                Read::Line(String::new()),
                Read::Line("last".to_string()),
            ]
        );
        // Exactly the limit is fine; a long last line without an end too.
        assert_eq!(
            reads(b"12345678\n123456789", 8).await,
            vec![Read::Line("12345678".to_string()), Read::TooLong]
        );
    }

    #[test]
    fn the_parse_error_has_a_null_id() {
        let line: serde_json::Value =
            serde_json::from_str(&parse_error_line("the line is not valid UTF-8")).unwrap();
        assert_eq!(
            line,
            serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {
                    "code": -32700,
                    "message": "Parse error",
                    "data": {"message": "the line is not valid UTF-8"}
                }
            })
        );
    }
}
