//! The cluster's bus: a NATS server (`[cluster] bus`) over which the
//! replicas tell each other, live, what their sessions do, and ask the
//! replica that runs a session to act on it (send, abort, approve).
//!
//! Two kinds of subject, under `pincer.`:
//! - [`EVENTS`]: every replica publishes what happens in the sessions it
//!   runs, in order, and hears the others' (never its own: the connection
//!   is `no_echo`). NATS keeps one publisher's messages in order on a
//!   subject, which is the order a session's events need.
//! - a replica's own subject ([`Bus::inbox_of`]): requests for it, each
//!   answered on the request's reply subject.
//!
//! What goes over the bus is bounded: [`Bus::tell`] queues at most
//! [`QUEUE`] messages for the publisher task (a replica that cannot reach
//! the server drops the newest and says so, it never grows without end),
//! and no message is larger than the server's `max_payload`.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

/// The subject of the sessions' events.
pub const EVENTS: &str = "pincer.events";

/// The messages waiting for the publisher task, at most.
const QUEUE: usize = 65_536;

/// How long a request waits for the replica it asks.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A replica's connection to the bus.
pub struct Bus {
    client: async_nats::Client,
    replica: String,
    queue: mpsc::Sender<(String, Bytes)>,
}

/// A request another replica sent this one, and how to answer it.
pub struct Asked {
    pub payload: Bytes,
    reply: Option<async_nats::Subject>,
}

impl Bus {
    /// Connects to the NATS server at `url` (`nats://host:port`, with
    /// `user:password@` if it asks for them) as replica `replica`. Fails
    /// if the server cannot be reached within `within`; once connected,
    /// the client reconnects by itself when the connection drops.
    ///
    /// TLS: a server that requires it (or a `tls://` URL) is reached over
    /// it, its certificate checked against the system's roots, or those
    /// in `ca` (PEM); with `ca`, a server that does not speak TLS is
    /// refused.
    pub async fn connect(
        url: &str,
        replica: &str,
        ca: Option<&std::path::Path>,
        within: Duration,
    ) -> Result<Self, String> {
        let shown = crate::config::cluster::redacted(url);
        let mut options = async_nats::ConnectOptions::new();
        if let Some(ca) = ca {
            if !ca.is_file() {
                return Err(format!(
                    "[cluster] bus_ca: {} is not a file of certificates",
                    ca.display()
                ));
            }
            options = options
                .add_root_certificates(ca.to_path_buf())
                .require_tls(true);
        }
        let connecting = options
            .no_echo()
            .name(format!("pincer {replica}"))
            .connection_timeout(within)
            .request_timeout(Some(REQUEST_TIMEOUT))
            .connect(url);
        let client = match tokio::time::timeout(within, connecting).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(format!("cannot reach the cluster's bus {shown}: {e}")),
            Err(_) => {
                return Err(format!(
                    "cannot reach the cluster's bus {shown}: no answer in {} s",
                    within.as_secs()
                ));
            }
        };
        let (queue, mut queued) = mpsc::channel::<(String, Bytes)>(QUEUE);
        let publisher = client.clone();
        tokio::spawn(async move {
            while let Some((subject, payload)) = queued.recv().await {
                if let Err(e) = publisher.publish(subject, payload).await {
                    tracing::warn!(error = %e, "cannot publish on the cluster's bus");
                }
            }
        });
        Ok(Self {
            client,
            replica: replica.to_string(),
            queue,
        })
    }

    /// This replica's name.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The subject on which replica `replica` takes requests. A name may
    /// hold anything a config gives it; a subject's tokens may not hold
    /// `.`, `*`, `>` or white space, so the name is written in hex.
    pub fn inbox_of(replica: &str) -> String {
        let mut subject = String::from("pincer.replica.");
        for byte in replica.bytes() {
            subject.push_str(&format!("{byte:02x}"));
        }
        subject
    }

    /// Publishes `payload` on `subject`, after whatever was told before
    /// it. Never waits: when the queue is full the message is dropped.
    pub fn tell(&self, subject: &str, payload: Vec<u8>) {
        let limit = self.client.server_info().max_payload;
        if payload.len() > limit {
            tracing::warn!(
                bytes = payload.len(),
                limit,
                "an event is larger than the bus takes; the other replicas miss it"
            );
            return;
        }
        if self
            .queue
            .try_send((subject.to_string(), Bytes::from(payload)))
            .is_err()
        {
            tracing::warn!("the cluster's bus is not keeping up; an event was dropped");
        }
    }

    /// Hears what is published on `subject`.
    pub async fn hear(&self, subject: &str) -> Result<mpsc::Receiver<Bytes>, String> {
        let mut subscriber = self
            .client
            .subscribe(subject.to_string())
            .await
            .map_err(|e| format!("cannot subscribe to {subject}: {e}"))?;
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(async move {
            use futures::StreamExt;
            while let Some(message) = subscriber.next().await {
                if tx.send(message.payload).await.is_err() {
                    break;
                }
            }
        });
        Ok(rx)
    }

    /// The requests other replicas send this one.
    pub async fn requests(&self) -> Result<mpsc::Receiver<Asked>, String> {
        let subject = Self::inbox_of(&self.replica);
        let mut subscriber = self
            .client
            .subscribe(subject.clone())
            .await
            .map_err(|e| format!("cannot subscribe to {subject}: {e}"))?;
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(async move {
            use futures::StreamExt;
            while let Some(message) = subscriber.next().await {
                let asked = Asked {
                    payload: message.payload,
                    reply: message.reply,
                };
                if tx.send(asked).await.is_err() {
                    break;
                }
            }
        });
        // Subscribed on the server before this returns: a request sent
        // right after is heard.
        self.client
            .flush()
            .await
            .map_err(|e| format!("cannot subscribe to {subject}: {e}"))?;
        Ok(rx)
    }

    /// Answers a request.
    pub async fn answer(&self, asked: Asked, payload: Vec<u8>) {
        let Some(reply) = asked.reply else { return };
        if let Err(e) = self.client.publish(reply, Bytes::from(payload)).await {
            tracing::warn!(error = %e, "cannot answer a replica's request");
        }
    }

    /// Asks replica `replica` and waits for its answer.
    pub async fn ask(&self, replica: &str, payload: Vec<u8>) -> Result<Bytes, String> {
        match self
            .client
            .request(Self::inbox_of(replica), Bytes::from(payload))
            .await
        {
            Ok(message) => Ok(message.payload),
            Err(e) => Err(match e.kind() {
                async_nats::RequestErrorKind::NoResponders => {
                    format!("replica `{replica}` is not running")
                }
                async_nats::RequestErrorKind::TimedOut => format!(
                    "replica `{replica}` did not answer in {} s",
                    REQUEST_TIMEOUT.as_secs()
                ),
                _ => format!("cannot reach replica `{replica}`: {e}"),
            }),
        }
    }

    /// Waits until everything published so far reached the server.
    pub async fn flush(&self) -> Result<(), String> {
        self.client.flush().await.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_replica_name_makes_one_valid_subject() {
        let subject = Bus::inbox_of("web 1.prod:*>");
        assert_eq!(subject, "pincer.replica.77656220312e70726f643a2a3e");
        assert_ne!(Bus::inbox_of("a.b"), Bus::inbox_of("a_b"));
    }
}
