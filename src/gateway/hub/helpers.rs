//! Helpers (the `task` tool's child sessions) as the gateway shows them,
//! after OpenClaw's spawned sessions: each gets a key of its own
//! (`agent:main:subagent:<its session id>`) that `sessions.list` lists under its
//! parent (`parentSessionKey`, `spawnedBy`) and `chat.history` reads, and
//! a run whose `chat` and `agent` events carry that key and `spawnedBy`.
//! The parent's run announces it and its end (`agent` events of stream
//! `subagent`, tied to the `task` call), so that a page can show it as a
//! card inside the call; `chat.abort` on its key stops it alone.
//!
//! Whoever follows the parent follows the helper from its start: its
//! events reach the clients that watch the run that made it.

use std::sync::Arc;

use super::{Audience, Hub, Outcome, Run};
use crate::acp::registry::Observed;
use crate::gateway::frames::now_ms;
use crate::gateway::protocol::events::{ChatMessage, HelperStep, Lifecycle, SessionMessage};

/// The key of helper session `child`, in the form OpenClaw gives a
/// spawned session. It follows from the session alone, so that a listing
/// made before the hub hears of a new helper names it as every later
/// event and listing do.
pub(super) fn helper_key(child: &str) -> String {
    format!("agent:main:subagent:{child}")
}

/// What the hub keeps of a running helper.
pub(super) struct HelperOf {
    /// The parent's run when the helper started, and its `task` call.
    parent_run: Option<String>,
    call: String,
    /// The helper's own run.
    run: String,
}

impl Hub {
    /// A helper started: its key, its run, its followers, and the card
    /// its parent's run shows.
    pub(super) fn helper_started(self: &Arc<Self>, event: Observed) {
        let Observed::HelperStarted {
            parent,
            child,
            call,
            agent,
            title,
            prompt,
            background,
        } = event
        else {
            return;
        };
        let parent = parent.0.to_string();
        let child = child.0.to_string();
        let parent_key = self.key_of(&parent);
        let key = helper_key(&child);
        self.keys().insert(&key, &child);
        self.keys_changed();
        let followers = self
            .conns()
            .by_session
            .get(&parent)
            .cloned()
            .unwrap_or_default();
        for conn in &followers {
            self.follow(conn, &child);
        }
        let run_id = uuid::Uuid::new_v4().to_string();
        let mut state = self.state();
        let parent_run = state.live.get(&parent).and_then(|l| l.active.clone());
        let mut run = Run::new(&child, &key);
        run.spawned_by = Some(parent_key.clone());
        self.agent(&run_id, &mut run, "lifecycle", Lifecycle::start(now_ms()));
        let message = SessionMessage {
            session_key: &key,
            run_id: &run_id,
            spawned_by: Some(&parent_key),
            message: ChatMessage::user(&prompt, now_ms()),
        };
        self.broadcast("session.message", &message, Audience::Session(&child));
        state.runs.insert(run_id.clone(), run);
        state.live.entry(child.clone()).or_default().active = Some(run_id.clone());
        if let Some(parent_run) = &parent_run
            && let Some(run) = state.runs.get_mut(parent_run)
        {
            let data = HelperStep {
                phase: "start",
                tool_call_id: call.clone(),
                child_session_key: key.clone(),
                child_run_id: run_id.clone(),
                title: Some(title),
                agent: Some(agent),
                background: Some(background),
                state: None,
            };
            self.agent(parent_run, run, "subagent", data);
        }
        state.helpers.insert(
            child.clone(),
            HelperOf {
                parent_run,
                call,
                run: run_id,
            },
        );
        drop(state);
        self.session_changed_as("spawn", &key, &child);
    }

    /// A helper ended: its run ends as its stop says, and its parent's
    /// run (if the hub still has it) tells its card.
    pub(super) fn helper_ended(self: &Arc<Self>, event: Observed) {
        let Observed::HelperEnded { child, stop, error } = event else {
            return;
        };
        let child = child.0.to_string();
        let Some(helper) = self.state().helpers.remove(&child) else {
            return;
        };
        let outcome = match stop {
            "cancelled" => Outcome::Aborted,
            "error" => Outcome::Error {
                message: error.unwrap_or_else(|| "the helper failed".to_string()),
                kind: "unknown",
            },
            "refusal" => Outcome::Error {
                message: "the model refused to answer".to_string(),
                kind: "refusal",
            },
            "max_tokens" => Outcome::Ok { stop: "max_tokens" },
            "max_turn_requests" => Outcome::Ok { stop: "max_turns" },
            _ => Outcome::Ok { stop: "stop" },
        };
        let state_name = match &outcome {
            Outcome::Ok { .. } => "done",
            Outcome::Aborted => "stopped",
            Outcome::Error { .. } => "failed",
        };
        let key = self.key_of(&child);
        self.finish(&helper.run, outcome);
        let mut state = self.state();
        if let Some(parent_run) = &helper.parent_run
            && let Some(run) = state.runs.get_mut(parent_run)
        {
            let data = HelperStep {
                phase: "end",
                tool_call_id: helper.call,
                child_session_key: key,
                child_run_id: helper.run,
                title: None,
                agent: None,
                background: None,
                state: Some(state_name),
            };
            self.agent(parent_run, run, "subagent", data);
        }
    }

    /// The helper session `session` is running (its key's `chat.abort`
    /// stops it; it cannot be prompted meanwhile): the hub has heard it
    /// start and not end, or it runs already and the hub is about to hear.
    pub fn is_running_helper(&self, session: &str) -> bool {
        let heard = self.state().helpers.contains_key(session);
        heard || self.registry.is_running_helper(session)
    }
}
