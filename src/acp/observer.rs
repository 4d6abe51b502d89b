//! The event bus between the process's ACP sessions and the one observer
//! that watches them all (the gateway, in `pincer acp --gateway`): what it
//! is told ([`Observed`]), and the channel it hears it on.
//!
//! It is a module of its own so that the sessions (which tell) and the
//! session table ([`super::registry`], which holds the sessions) both
//! depend on it, and not on each other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, SessionId, SessionNotification, StopReason,
};
use tokio::sync::{Notify, mpsc};

/// The `_meta` key of a `session/prompt` that carries the gateway's run:
/// `{"tag": "<run id>", "queue": "steer" | "follow-up"}`. The tag comes
/// back in [`Observed::PromptStarted`] and [`Observed::PromptEnded`]; the
/// queue mode applies to this prompt if it has to wait for a busy session.
/// A `session/cancel` with `{"tag": "<run id>"}` under this key cancels
/// that prompt alone.
pub const PROMPT_META_KEY: &str = "pincer/gateway";

/// What the observer is told, per session, in the order it happened.
// Updates are nearly every event, so boxing them would cost an allocation
// per streamed token for the sake of the rare small variants.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Observed {
    /// A `session/update`, whichever connection it went to (live updates
    /// only: a `session/load` replay is not repeated here).
    Update(SessionNotification),
    /// The agent began working on a prompt: a fresh run, a prompt a running
    /// run took in (steering, follow-up), or a command (`/compact`). `tag`
    /// is the prompt's [`PROMPT_META_KEY`] tag (`None`: an editor's prompt);
    /// `text` is what the user wrote.
    PromptStarted {
        session: SessionId,
        tag: Option<String>,
        text: String,
    },
    /// A prompt's request was answered. Every prompt request gets exactly
    /// one, after every update of its part of the run; one refused before
    /// it ran gets one without a `PromptStarted`.
    PromptEnded {
        session: SessionId,
        tag: Option<String>,
        result: Result<StopReason, String>,
    },
    /// The session's owner (an editor) answered a permission question:
    /// `option` is the chosen option (`None`: cancelled or unanswered).
    PermissionResolved {
        session: SessionId,
        tool_call_id: String,
        option: Option<(String, PermissionOptionKind)>,
    },
    /// Background work of a session owned by the observer's connection
    /// ended (a helper started with `background: true`, a `process`
    /// command): `text` is what the model is to read of it. The observer
    /// starts a turn with it, as for a scheduled run.
    BackgroundFinished { session: SessionId, text: String },
    /// Session `parent`'s `task` call `call` started helper `child` (a
    /// session of its own, which is not in the registry: its updates come
    /// as [`Observed::Update`]s under its id until
    /// [`Observed::HelperEnded`]).
    HelperStarted {
        parent: SessionId,
        child: SessionId,
        call: String,
        /// The helper's definition (`general-purpose` without one).
        agent: String,
        /// The model's description of the job.
        title: String,
        prompt: String,
        background: bool,
    },
    /// Helper `child` stopped: `stop` is an ACP stop reason's name
    /// (`end_turn`, `cancelled`, …, or `error`, with `error` its message).
    HelperEnded {
        child: SessionId,
        stop: &'static str,
        error: Option<String>,
    },
    /// The session was opened (new, loaded, resumed) by a connection.
    Opened { session: SessionId },
    /// The session was closed or deleted.
    Closed { session: SessionId },
}

/// How far the observer got: events told and events it has heard (taken
/// in and gone back for the next), so that whoever answers the agent
/// outside the bus (the gateway's permission questions come over its ACP
/// connection) can wait until the events told before are handled.
#[derive(Default)]
struct Progress {
    told: AtomicU64,
    heard: AtomicU64,
    moved: Notify,
}

/// The observer's end of the bus: the events in the order they were told.
/// An event counts as heard once the observer asks for the next one.
pub struct Observer {
    rx: mpsc::UnboundedReceiver<Observed>,
    progress: Arc<Progress>,
    /// An event was handed out and the observer has not come back yet.
    holding: bool,
}

impl Observer {
    /// The next event (`None`: nobody tells any more).
    pub async fn recv(&mut self) -> Option<Observed> {
        self.settle();
        let event = self.rx.recv().await;
        self.holding = event.is_some();
        event
    }

    /// The next event if one is there.
    pub fn try_recv(&mut self) -> Result<Observed, mpsc::error::TryRecvError> {
        self.settle();
        let event = self.rx.try_recv();
        self.holding = event.is_ok();
        event
    }

    fn settle(&mut self) {
        if std::mem::take(&mut self.holding) {
            self.progress.heard.fetch_add(1, Ordering::SeqCst);
            self.progress.moved.notify_waiters();
        }
    }
}

impl Drop for Observer {
    /// Nobody hears any more: nobody waits for it either.
    fn drop(&mut self) {
        self.progress.heard.store(u64::MAX, Ordering::SeqCst);
        self.progress.moved.notify_waiters();
    }
}

/// The observer's channel, once someone observes, and the connection that
/// is the observer's own.
#[derive(Default)]
pub struct Bus {
    observer: OnceLock<mpsc::UnboundedSender<Observed>>,
    /// The connection whose client is the observer.
    observer_connection: OnceLock<u64>,
    progress: Arc<Progress>,
}

impl Bus {
    /// Starts telling what every session does; there is one observer per
    /// process, so a second call gets `None`.
    pub fn observe(&self) -> Option<Observer> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.observer.set(tx).ok().map(|()| Observer {
            rx,
            progress: self.progress.clone(),
            holding: false,
        })
    }

    /// Connection `connection` belongs to the observer: updates of the
    /// sessions it owns reach it through [`Bus::observe`] only.
    pub fn observed_by(&self, connection: u64) {
        let _ = self.observer_connection.set(connection);
    }

    /// The observer's own connection, if it has one.
    pub fn observer_connection(&self) -> Option<u64> {
        self.observer_connection.get().copied()
    }

    /// Whether updates for sessions owned by `connection` need not be sent.
    pub fn hears_through_observer(&self, connection: u64) -> bool {
        self.observer_connection.get() == Some(&connection)
    }

    /// Whether anyone observes the sessions.
    pub fn is_observed(&self) -> bool {
        self.observer.get().is_some()
    }

    /// Tells the observer, if there is one.
    pub fn tell(&self, event: Observed) {
        if let Some(tx) = self.observer.get() {
            self.progress.told.fetch_add(1, Ordering::SeqCst);
            if tx.send(event).is_err() {
                self.progress.heard.store(u64::MAX, Ordering::SeqCst);
            }
        }
    }

    /// Waits until the observer has heard every event told before this
    /// call (at once when nobody observes).
    pub fn caught_up(&self) -> impl Future<Output = ()> + Send + 'static {
        let progress = self.progress.clone();
        let target = progress.told.load(Ordering::SeqCst);
        async move {
            loop {
                let moved = progress.moved.notified();
                tokio::pin!(moved);
                moved.as_mut().enable();
                if progress.heard.load(Ordering::SeqCst) >= target {
                    return;
                }
                moved.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn opened(id: &str) -> Observed {
        Observed::Opened {
            session: SessionId::new(id),
        }
    }

    /// `caught_up` waits for the events told before it, not for later
    /// ones, and never for an observer that is gone.
    #[tokio::test]
    async fn caught_up_waits_for_what_was_told_before_it() {
        let bus = Bus::default();
        // Nobody observes: nothing to wait for.
        bus.tell(opened("a"));
        bus.caught_up().await;

        let mut observer = bus.observe().unwrap();
        bus.tell(opened("b"));
        bus.tell(opened("c"));
        let short = Duration::from_millis(50);
        assert!(tokio::time::timeout(short, bus.caught_up()).await.is_err());
        observer.recv().await.unwrap();
        observer.recv().await.unwrap();
        // "c" is handed out but not handled until the observer comes back.
        assert!(tokio::time::timeout(short, bus.caught_up()).await.is_err());
        let waiting = tokio::spawn(bus.caught_up());
        tokio::time::sleep(short).await;
        assert!(!waiting.is_finished());
        assert!(observer.try_recv().is_err());
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the observer came back for more: everything told was heard")
            .unwrap();

        // Told after the wait began: not waited for.
        let before = bus.caught_up();
        bus.tell(opened("d"));
        tokio::time::timeout(short, before).await.unwrap();

        drop(observer);
        tokio::time::timeout(short, bus.caught_up()).await.unwrap();
    }
}
