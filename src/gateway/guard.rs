//! The socket under a gateway connection, read with a budget: before the
//! client has authenticated, at most [`PREAUTH_BYTES`] are read from it,
//! whatever size its frames announce. A stranger cannot make pincer buffer
//! a 25 MiB "connect"; the connection is refused once the budget is spent.
//! After a refusal the socket is drained, not read, so that the close frame
//! reaches the client instead of a reset.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// Bytes a client may send before `connect` succeeds: a 64 KiB frame plus
/// its header, and a few pings.
pub const PREAUTH_BYTES: usize = 64 * 1024 + 1024;

/// Shared between the socket and the connection's task.
#[derive(Debug, Default)]
pub struct Budget {
    authenticated: AtomicBool,
    read: AtomicUsize,
    /// Fires when the budget ran out before `connect` succeeded.
    pub exhausted: Notify,
    /// Read and drop everything from now on.
    draining: AtomicBool,
}

impl Budget {
    pub fn authenticated(&self) {
        self.authenticated.store(true, Ordering::Release);
    }

    /// The connection is being closed: what the client still sends is read
    /// and dropped.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
}

pub struct Guarded<IO> {
    inner: IO,
    budget: Arc<Budget>,
}

impl<IO> Guarded<IO> {
    pub fn new(inner: IO, budget: Arc<Budget>) -> Self {
        Self { inner, budget }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.budget.draining.load(Ordering::Acquire) {
            let mut scratch = [0u8; 4096];
            loop {
                let mut sink = ReadBuf::new(&mut scratch);
                match Pin::new(&mut this.inner).poll_read(cx, &mut sink) {
                    Poll::Ready(Ok(())) if sink.filled().is_empty() => return Poll::Ready(Ok(())),
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
        }
        if this.budget.authenticated.load(Ordering::Acquire) {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let read = this.budget.read.load(Ordering::Acquire);
        let left = PREAUTH_BYTES.saturating_sub(read);
        if left == 0 {
            // Nothing more is read; the connection's task closes it.
            this.budget.exhausted.notify_one();
            return Poll::Pending;
        }
        let mut chunk = [0u8; 8192];
        let take = left.min(buf.remaining()).min(chunk.len());
        let mut limited = ReadBuf::new(&mut chunk[..take]);
        match Pin::new(&mut this.inner).poll_read(cx, &mut limited) {
            Poll::Ready(Ok(())) => {
                let filled = limited.filled();
                this.budget.read.fetch_add(filled.len(), Ordering::AcqRel);
                buf.put_slice(filled);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn before_connect_no_more_than_the_budget_is_read() {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Budget::default());
        let mut guarded = Guarded::new(server, budget.clone());
        client.write_all(&vec![b'x'; 200 * 1024]).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 16384];
        let exhausted = loop {
            tokio::select! {
                n = guarded.read(&mut buf) => got.extend_from_slice(&buf[..n.unwrap()]),
                () = budget.exhausted.notified() => break true,
                () = tokio::time::sleep(std::time::Duration::from_secs(5)) => break false,
            }
        };
        assert!(exhausted, "the budget's end was never announced");
        assert_eq!(got.len(), PREAUTH_BYTES);
    }

    #[tokio::test]
    async fn after_connect_reads_are_unlimited() {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let budget = Arc::new(Budget::default());
        budget.authenticated();
        let mut guarded = Guarded::new(server, budget);
        client.write_all(&vec![b'x'; 200 * 1024]).await.unwrap();
        drop(client);
        let mut got = Vec::new();
        guarded.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), 200 * 1024);
    }
}
