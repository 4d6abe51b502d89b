//! Idle sessions (see the hub's module comment): when each session the
//! gateway opened was last used, and the sweep that unloads the quiet
//! ones.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Hub, Live};

impl Hub {
    /// Notes that `session` was used now.
    pub(super) fn used(&self, session: &str) {
        self.state()
            .used
            .insert(session.to_string(), Instant::now());
    }

    /// Unloads, every little while, the sessions idle for `idle` (see the
    /// module's comment), for as long as the process runs.
    pub fn unload_idle_after(self: &Arc<Self>, idle: Duration) {
        let period = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
        let hub = self.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let unloaded = hub.unload_idle(idle).await;
                if unloaded > 0 {
                    tracing::debug!(unloaded, "unloaded idle sessions");
                }
            }
        });
    }

    /// Unloads the gateway's sessions that have been quiet for `idle`: no
    /// run, nothing queued or collected, no approval waiting, and the
    /// agent idle too (no turn, no background process). Returns how many.
    /// Holds the opening lock meanwhile, so a session is never unloaded
    /// between [`Hub::open`] and its use; and `open` marks a session used,
    /// so its caller has `idle` to use it.
    pub async fn unload_idle(&self, idle: Duration) -> usize {
        let _one = self.opening.lock().await;
        let mut unloaded = 0;
        for session in self.registry.observer_sessions() {
            let quiet = {
                let state = self.state();
                state
                    .used
                    .get(&session)
                    .is_none_or(|at| at.elapsed() >= idle)
                    && state.live.get(&session).is_none_or(Live::is_quiet)
                    && !state.approvals.values().any(|a| a.session == session)
            };
            if quiet && self.registry.unload_idle(&session) {
                self.release(&session);
                tracing::debug!(session, "unloaded an idle session");
                unloaded += 1;
            }
        }
        // What is kept of sessions no longer open (closed or deleted
        // elsewhere) goes too, except a chosen queue mode; the opening
        // lock keeps a session from opening meanwhile.
        {
            let mut state = self.state();
            let registry = &self.registry;
            state.used.retain(|session, _| registry.is_open(session));
            state.prompts.retain(|session, _| registry.is_open(session));
            state.live.retain(|session, live| {
                registry.is_open(session)
                    || !live.is_quiet()
                    || live.queue_mode.is_some()
                    || live.verbose.is_some()
            });
        }
        drop(_one);
        // Runs past their deduplication time go too, even with no new
        // message to prune them.
        drop(self.prune());
        unloaded
    }

    /// Forgets what the hub kept of an unloaded session, except the queue
    /// mode a client chose for it (`sessions.patch`), which holds when it
    /// comes back.
    pub(super) fn release(&self, session: &str) {
        let mut state = self.state();
        state.used.remove(session);
        let (queue_mode, verbose) = state
            .live
            .remove(session)
            .map(|l| (l.queue_mode, l.verbose))
            .unwrap_or_default();
        if queue_mode.is_some() || verbose.is_some() {
            state.live.insert(
                session.to_string(),
                Live {
                    queue_mode,
                    verbose,
                    ..Live::default()
                },
            );
        }
        state.asked.retain(|(s, _)| s != session);
        state.prompts.remove(session);
    }
}
