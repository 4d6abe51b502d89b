//! Runs: a message sent to a session as a run (its id the client's
//! idempotency key), the queue modes when the session is busy (`collect`
//! holds messages and sends them as one), waiting for a run's end, its
//! outcome, aborting, and the last events of a run that ends.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::ContentBlock;

use crate::gateway::protocol::events::{ChatState, Lifecycle};

use super::{
    COLLECT_DEBOUNCE, Collected, DEDUPE_TTL, Failure, Hub, Outcome, QueueMode, Run, State,
    check_key, check_run_id, outcome_of,
};
use crate::gateway::conn::Conn;
use crate::gateway::frames::now_ms;
use crate::gateway::link::Link;

impl Hub {
    /// What a repeated idempotency key answers: `None` for a new one.
    pub fn known_run(&self, run_id: &str) -> Option<&'static str> {
        let state = self.state();
        let run = state.runs.get(run_id)?;
        Some(match &run.outcome {
            None => "in_flight",
            Some(Outcome::Error { .. }) => "error",
            Some(Outcome::Aborted) => "timeout",
            Some(Outcome::Ok { .. }) => "ok",
        })
    }

    /// A message for the session `key` names (opened, or created on first
    /// use) as run `run`: `chat.send` and `agent`, a channel's message, a
    /// scheduled run. `conn` follows the session from now on. A run id
    /// known already is not sent again: the answer is that run's status
    /// (see [`Hub::known_run`]), else `started`.
    pub async fn submit(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        key: &str,
        run: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
    ) -> Result<&'static str, Failure> {
        self.submit_as(conn, key, run, content, mode, None).await
    }

    /// [`Hub::submit`] for a session nobody watches (a chat channel's,
    /// cron's, the heartbeat's): before the message runs, its session's
    /// sandbox becomes an unattended one, with `sandbox` the user's
    /// `[sandbox]` for that channel or job.
    pub async fn submit_unattended(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        key: &str,
        run: &str,
        content: Vec<ContentBlock>,
        sandbox: &crate::tools::sandbox::SandboxConfig,
    ) -> Result<&'static str, Failure> {
        self.submit_as(conn, key, run, content, None, Some(sandbox))
            .await
    }

    async fn submit_as(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        key: &str,
        run: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
        unattended: Option<&crate::tools::sandbox::SandboxConfig>,
    ) -> Result<&'static str, Failure> {
        check_key("sessionKey", key)?;
        check_run_id(run)?;
        if let Some(status) = self.known_run(run) {
            return Ok(status);
        }
        // A channel's session that another replica of the cluster runs
        // (a chat's message reached this one): sent to it there.
        if unattended.is_some()
            && let Some(elsewhere) = self.elsewhere(key).await
        {
            return self
                .send_elsewhere(conn, &elsewhere, run, content, mode, true)
                .await;
        }
        self.submit_here(Some(conn), key, run, content, mode, unattended)
            .await
    }

    /// A message another replica took for a session this one runs
    /// ([`Hub::send_elsewhere`]): sent as its client's would be. A chat
    /// channel's (`unattended`) runs in this replica's own sandbox for
    /// that channel, and this replica's channel follows the session: the
    /// replica that runs a chat's session sends its replies there, once.
    /// One for a channel this replica does not run is refused.
    pub(super) async fn submit_for_peer(
        self: &Arc<Self>,
        key: &str,
        run: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
        unattended: bool,
    ) -> Result<&'static str, Failure> {
        let (sandbox, conn) = if unattended {
            let channel = key.split(':').next().unwrap_or_default();
            let found = self
                .channels
                .get()
                .and_then(|channels| Some((channels.sandbox(channel)?, channels.conn(channel)?)));
            match found {
                Some((sandbox, conn)) => (Some(sandbox), Some(conn)),
                None => {
                    return Err(Failure::invalid(format!(
                        "this replica runs no channel `{channel}` for {key}"
                    )));
                }
            }
        } else {
            (None, None)
        };
        self.submit_here(conn.as_ref(), key, run, content, mode, sandbox.as_ref())
            .await
    }

    /// Sends to the session `key` names, opened here: followed by `conn`
    /// (none for another replica's message), unattended in `unattended`'s
    /// sandbox for a chat channel's.
    async fn submit_here(
        self: &Arc<Self>,
        conn: Option<&Arc<Conn>>,
        key: &str,
        run: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
        unattended: Option<&crate::tools::sandbox::SandboxConfig>,
    ) -> Result<&'static str, Failure> {
        check_key("sessionKey", key)?;
        check_run_id(run)?;
        if let Some(status) = self.known_run(run) {
            return Ok(status);
        }
        if self
            .lookup(key)
            .is_some_and(|id| self.is_running_helper(&id))
        {
            return Err(Failure::invalid(format!(
                "{key} is a helper working for its parent's run: it takes messages once it has finished (`chat.abort` on its key stops it)"
            )));
        }
        let session = self.open(key).await?;
        if let Some(sandbox) = unattended
            && !self.registry.make_unattended(&session, sandbox)
        {
            return Err(Failure::invalid(format!(
                "the session of {key} closed before its run could start"
            )));
        }
        if let Some(conn) = conn {
            self.follow(conn, &session);
        }
        // Two sends with one run id racing past the check above: the
        // first wins.
        if let Some(status) = self.known_run(run) {
            return Ok(status);
        }
        self.send_from(conn.map(|c| c.id), &session, key, run, content, mode)?;
        Ok("started")
    }

    /// Stops what runs for the session `key` names (`chat.abort`): every
    /// run of it, or with `run`, that run alone if it is one of the
    /// session's (as OpenClaw's gateway does: a message sent after it
    /// goes on). Returns the runs stopped, or `None` when nothing was.
    pub fn abort_key(
        self: &Arc<Self>,
        key: &str,
        run: Option<&str>,
    ) -> Result<Option<Vec<String>>, Failure> {
        check_key("sessionKey", key)?;
        let Some(session) = self.lookup(key) else {
            return Ok(None);
        };
        let runs = self.unfinished(&session);
        match run {
            _ if runs.is_empty() => Ok(None),
            None => self.abort(&session).map(Some),
            Some(run) => self.abort_run(&session, run, &runs),
        }
    }

    /// Stops one of `session`'s unfinished `runs`: a collected message not
    /// sent yet is dropped from the batch; one sent in a batch stops the
    /// batch (its message is in it); any other is cancelled at the agent
    /// by its tag, which stops it whether it runs, waits or is still on
    /// its way. Returns the runs stopped (`None`: `run` is none of them).
    fn abort_run(
        self: &Arc<Self>,
        session: &str,
        run: &str,
        runs: &[String],
    ) -> Result<Option<Vec<String>>, Failure> {
        let carrier = {
            let mut state = self.state();
            if let Some(live) = state.live.get_mut(session)
                && let Some(at) = live.collected.iter().position(|c| c.run == run)
            {
                live.collected.remove(at);
                drop(state);
                self.finish(run, Outcome::Aborted);
                return Ok(Some(vec![run.to_string()]));
            }
            runs.iter()
                .filter_map(|id| Some((id, state.runs.get(id)?)))
                .find(|(_, r)| r.members.iter().any(|m| m == run))
                .map(|(id, r)| (id.clone(), r.members.clone()))
        };
        let stopped = match carrier {
            Some((lead, members)) => std::iter::once(lead).chain(members).collect(),
            None if runs.iter().any(|r| r == run) => vec![run.to_string()],
            None => return Ok(None),
        };
        self.link()?.cancel_prompt(session, &stopped[0]);
        Ok(Some(stopped))
    }

    /// Sends a message to a session as run `run_id`, following the queue
    /// mode when the session is busy.
    pub fn send(
        self: &Arc<Self>,
        session: &str,
        key: &str,
        run_id: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
    ) -> Result<(), Failure> {
        self.send_from(None, session, key, run_id, content, mode)
    }

    /// [`Hub::send`] for a message client `origin` sent.
    fn send_from(
        self: &Arc<Self>,
        origin: Option<u64>,
        session: &str,
        key: &str,
        run_id: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
    ) -> Result<(), Failure> {
        let mut run = Run::new(session, key);
        run.origin = origin;
        let link = self.link()?.clone();
        let mut state = self.prune();
        state.used.insert(session.to_string(), Instant::now());
        let live = state.live.entry(session.to_string()).or_default();
        // Without a mode of the message's or one set here, the session's
        // own (`sessions.patch` recorded it in the transcript, an editor
        // may have chosen it) decides: steer or follow-up.
        let mode = mode.or(live.queue_mode);
        let busy = live.active.is_some() || !live.pending.is_empty();
        if busy && mode == Some(QueueMode::Collect) {
            live.collected.push(Collected {
                run: run_id.to_string(),
                key: key.to_string(),
                content,
            });
            state.runs.insert(run_id.to_string(), run);
            return Ok(());
        }
        live.pending.push(run_id.to_string());
        state.runs.insert(run_id.to_string(), run);
        drop(state);
        if busy && mode == Some(QueueMode::Interrupt) {
            link.cancel(session);
        }
        let queue = match mode {
            Some(QueueMode::FollowUp) => Some("follow-up"),
            Some(QueueMode::Steer) => Some("steer"),
            _ => None,
        };
        self.dispatch(
            link,
            session.to_string(),
            run_id.to_string(),
            content,
            queue,
        );
        Ok(())
    }

    pub(super) fn dispatch(
        self: &Arc<Self>,
        link: Link,
        session: String,
        run_id: String,
        content: Vec<ContentBlock>,
        queue: Option<&'static str>,
    ) {
        let hub = self.clone();
        tokio::spawn(async move {
            let result = link.prompt(&session, content, &run_id, queue).await;
            // The observer ends the run, after its last update; this is for
            // a prompt the agent never got to tell about.
            let waiter = hub.wait_for(&run_id);
            if let Some(waiter) = waiter
                && tokio::time::timeout(Duration::from_secs(2), waiter)
                    .await
                    .is_err()
            {
                let outcome = match result {
                    Ok(stop) => outcome_of(stop),
                    Err(e) => Outcome::Error {
                        message: crate::gateway::link::error_text(&e),
                        kind: "unknown",
                    },
                };
                hub.finish(&run_id, outcome);
            }
        });
    }

    /// A receiver that fires when the run ends (`None`: it has ended or is
    /// unknown).
    pub fn wait_for(&self, run_id: &str) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let mut state = self.state();
        let run = state.runs.get_mut(run_id)?;
        if run.outcome.is_some() {
            return None;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        run.waiters.push(tx);
        Some(rx)
    }

    /// How a run ended, with its text: `None` while it runs.
    pub fn outcome(&self, run_id: &str) -> Option<Option<(Outcome, String, String)>> {
        let state = self.state();
        let run = state.runs.get(run_id)?;
        Some(
            run.outcome
                .clone()
                .map(|o| (o, run.text.clone(), run.key.clone())),
        )
    }

    /// The runs of a session not yet ended (the running one first).
    pub fn unfinished(&self, session: &str) -> Vec<String> {
        let state = self.state();
        let mut runs: Vec<String> = Vec::new();
        if let Some(live) = state.live.get(session) {
            runs.extend(live.active.iter().cloned());
            runs.extend(
                live.pending
                    .iter()
                    .filter(|r| !runs.contains(r))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            runs.extend(live.collected.iter().map(|c| c.run.clone()));
        }
        runs
    }

    /// Each session with work: its id, whether a run is going, and how
    /// many runs or held messages wait behind it (a session runs one at a
    /// time).
    pub fn queues(&self) -> Vec<(String, bool, usize)> {
        let state = self.state();
        state
            .live
            .iter()
            .filter(|(_, live)| !live.is_quiet())
            .map(|(session, live)| {
                let waiting = live
                    .pending
                    .iter()
                    .filter(|run| live.active.as_ref() != Some(*run))
                    .count()
                    + live.collected.len();
                (session.clone(), live.active.is_some(), waiting)
            })
            .collect()
    }

    /// Aborts a session's runs: the agent's, and messages `collect` holds.
    pub fn abort(self: &Arc<Self>, session: &str) -> Result<Vec<String>, Failure> {
        let runs = self.unfinished(session);
        let collected: Vec<String> = {
            let mut state = self.state();
            state
                .live
                .get_mut(session)
                .map(|l| std::mem::take(&mut l.collected))
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.run)
                .collect()
        };
        for run in &collected {
            self.finish(run, Outcome::Aborted);
        }
        self.link()?.cancel(session);
        Ok(runs)
    }

    /// Drops runs that ended long enough ago.
    pub(super) fn prune(&self) -> parking_lot::MutexGuard<'_, State> {
        let mut state = self.state();
        while let Some((at, _)) = state.finished.front() {
            if at.elapsed() < DEDUPE_TTL {
                break;
            }
            if let Some((_, id)) = state.finished.pop_front() {
                state.runs.remove(&id);
            }
        }
        state
    }

    /// Ends a run (once): its last chat event and lifecycle end, and
    /// whoever waits for it.
    pub fn finish(self: &Arc<Self>, run_id: &str, outcome: Outcome) {
        let mut state = self.state();
        let Some(run) = state.runs.get_mut(run_id) else {
            return;
        };
        if run.outcome.is_some() {
            return;
        }
        run.outcome = Some(outcome.clone());
        let session = run.session.clone();
        let members = std::mem::take(&mut run.members);
        self.end_events(run_id, run, &outcome);
        for waiter in run.waiters.drain(..) {
            let _ = waiter.send(());
        }
        let (text, thinking) = (run.text.clone(), run.thinking.clone());
        state
            .finished
            .push_back((Instant::now(), run_id.to_string()));
        for member in members {
            if let Some(run) = state.runs.get_mut(&member)
                && run.outcome.is_none()
            {
                run.outcome = Some(outcome.clone());
                run.text = text.clone();
                run.thinking = thinking.clone();
                match &outcome {
                    Outcome::Ok { stop } => {
                        self.chat(&member, run, ChatState::Final, |event, run| {
                            event.message = Some(run.message());
                            event.stop_reason = Some(Cow::Borrowed(*stop));
                        })
                    }
                    _ => self.chat(&member, run, ChatState::Aborted, |event, _| {
                        event.stop_reason = Some(Cow::Borrowed("aborted"));
                    }),
                }
                for waiter in run.waiters.drain(..) {
                    let _ = waiter.send(());
                }
                state.finished.push_back((Instant::now(), member));
            }
        }
        state.used.insert(session.clone(), Instant::now());
        let flush = if let Some(live) = state.live.get_mut(&session) {
            live.pending.retain(|r| r != run_id);
            if live.active.as_deref() == Some(run_id) {
                live.active = None;
            }
            let idle = live.active.is_none() && live.pending.is_empty();
            let flush = idle && !live.collected.is_empty() && !live.flush_scheduled;
            if flush {
                live.flush_scheduled = true;
            }
            flush
        } else {
            false
        };
        // Approvals of the session that nobody answered are moot now.
        let moot: Vec<String> = state
            .approvals
            .iter()
            .filter(|(_, a)| a.session == session)
            .map(|(id, _)| id.clone())
            .collect();
        drop(state);
        for id in moot {
            self.settle(&id, None, "cancelled");
        }
        self.session_changed("send", &session);
        if flush {
            self.schedule_flush(session);
        }
    }

    pub(super) fn end_events(&self, run_id: &str, run: &mut Run, outcome: &Outcome) {
        match outcome {
            Outcome::Ok { stop } => {
                self.chat(run_id, run, ChatState::Final, |event, run| {
                    event.message = Some(run.message());
                    event.stop_reason = Some(Cow::Borrowed(*stop));
                    event.usage = run.usage.clone();
                });
                self.agent(run_id, run, "lifecycle", Lifecycle::end(now_ms()));
            }
            Outcome::Aborted => {
                self.chat(run_id, run, ChatState::Aborted, |event, run| {
                    event.message = Some(run.message());
                    event.stop_reason = Some(Cow::Borrowed("aborted"));
                    event.usage = run.usage.clone();
                });
                let data = Lifecycle {
                    aborted: Some(true),
                    ..Lifecycle::end(now_ms())
                };
                self.agent(run_id, run, "lifecycle", data);
            }
            Outcome::Error { message, kind } => {
                self.chat(run_id, run, ChatState::Error, |event, _| {
                    event.error_message = Some(Cow::Owned(message.clone()));
                    event.error_kind = Some(Cow::Borrowed(*kind));
                });
                let data = Lifecycle {
                    phase: "error",
                    error: Some(message.clone()),
                    ..Lifecycle::end(now_ms())
                };
                self.agent(run_id, run, "lifecycle", data);
            }
        }
    }

    /// Sends what `collect` gathered as one message, once no more come.
    pub(super) fn schedule_flush(self: &Arc<Self>, session: String) {
        let Some(link) = self.link.get().cloned() else {
            return;
        };
        let state_session = session.clone();
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(COLLECT_DEBOUNCE).await;
            let batch = {
                let mut state = this.state();
                let Some(live) = state.live.get_mut(&state_session) else {
                    return;
                };
                live.flush_scheduled = false;
                if live.active.is_some() || !live.pending.is_empty() {
                    return;
                }
                std::mem::take(&mut live.collected)
            };
            let Some(first) = batch.first() else { return };
            let lead = first.run.clone();
            let mut content = Vec::new();
            for (i, item) in batch.iter().enumerate() {
                if i > 0 {
                    content.push(ContentBlock::Text(
                        agent_client_protocol::v1::schema::TextContent::new("\n\n"),
                    ));
                }
                content.extend(item.content.iter().cloned());
            }
            {
                let mut state = this.state();
                if let Some(run) = state.runs.get_mut(&lead) {
                    run.members = batch.iter().skip(1).map(|c| c.run.clone()).collect();
                    run.key = first.key.clone();
                }
                if let Some(live) = state.live.get_mut(&state_session) {
                    live.pending.push(lead.clone());
                }
            }
            this.dispatch(link, session, lead, join_text(content), None);
        });
    }
}

/// Joins adjacent text blocks (a collected batch reads as one message).
fn join_text(blocks: Vec<ContentBlock>) -> Vec<ContentBlock> {
    let mut out: Vec<ContentBlock> = Vec::new();
    for block in blocks {
        match (out.last_mut(), block) {
            (Some(ContentBlock::Text(last)), ContentBlock::Text(next)) => {
                last.text.push_str(&next.text);
            }
            (_, block) => out.push(block),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::frames::UNAVAILABLE;
    use pretty_assertions::assert_eq;

    /// A deleted session's progress card is not kept.
    #[test]
    fn a_deleted_session_s_card_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::for_test(dir.path());
        let card = super::super::Card {
            revision: 1,
            updated_at: 1,
            steps: vec![("Read the parser".into(), "pending")],
        };
        hub.state().cards.insert("s1".into(), card.clone());
        hub.state().cards.insert("s2".into(), card);
        hub.deleted("web:one", "s1");
        assert!(hub.card("s1").is_none());
        assert!(hub.card("s2").is_some());
    }

    /// `chat.abort` and a channel's `/stop` are this one call: a key that
    /// names no session, or a run that is not the session's, stops
    /// nothing; a run of the session goes on to stop the agent's turn
    /// (here, with no agent connected, the hub says so); a key that is not
    /// printable text is refused with the wire's error.
    #[test]
    fn abort_by_key_stops_only_the_runs_of_the_session_the_key_names() {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::for_test(dir.path());
        assert_eq!(hub.abort_key("telegram:dm:9", None).unwrap(), None);

        hub.keys().insert("telegram:dm:1", "s1");
        assert_eq!(hub.abort_key("telegram:dm:1", None).unwrap(), None);
        hub.state().live.entry("s1".into()).or_default().active = Some("r1".into());
        assert_eq!(hub.abort_key("telegram:dm:1", Some("r2")).unwrap(), None);
        let reached = hub.abort_key("telegram:dm:1", Some("r1")).unwrap_err();
        assert_eq!(reached.code, UNAVAILABLE);

        // A collected message not sent yet is dropped alone, without the
        // agent: the rest of the batch stays.
        for run in ["c1", "c2"] {
            let mut state = hub.state();
            state
                .runs
                .insert(run.into(), Run::new("s1", "telegram:dm:1"));
            state
                .live
                .entry("s1".into())
                .or_default()
                .collected
                .push(Collected {
                    run: run.into(),
                    key: "telegram:dm:1".into(),
                    content: Vec::new(),
                });
        }
        assert_eq!(
            hub.abort_key("telegram:dm:1", Some("c1")).unwrap(),
            Some(vec!["c1".to_string()])
        );
        assert!(matches!(
            hub.outcome("c1"),
            Some(Some((Outcome::Aborted, _, _)))
        ));
        assert_eq!(hub.outcome("c2").map(|o| o.is_none()), Some(true));
        assert_eq!(
            hub.unfinished("s1"),
            vec!["r1".to_string(), "c2".to_string()]
        );

        // A message sent in a batch is stopped through the batch's run,
        // at the agent (which this hub does not have: it says so).
        {
            let mut state = hub.state();
            let mut lead = Run::new("s1", "telegram:dm:1");
            lead.members = vec!["b2".into()];
            state.runs.insert("b1".into(), lead);
            state
                .runs
                .insert("b2".into(), Run::new("s1", "telegram:dm:1"));
            state
                .live
                .entry("s1".into())
                .or_default()
                .pending
                .push("b1".into());
        }
        let reached = hub.abort_key("telegram:dm:1", Some("b2")).unwrap_err();
        assert_eq!(reached.code, UNAVAILABLE);
        assert_eq!(hub.abort_key("telegram:dm:1", Some("b3")).unwrap(), None);

        let bad = hub.abort_key("telegram:\u{1b}[2J", None).unwrap_err();
        assert_eq!(
            bad.message,
            "`sessionKey` holds a control character or a bidirectional override: a session key is printable text"
        );
    }
}
