//! The prompt queue, cancel and steering of one session as one state
//! machine: which prompt the running work answers, which prompts wait for
//! it, and the token that cancels it. Every transition is one method that
//! runs under the session's one lock for it and returns what the caller
//! must do outside the lock (answer a request, start a run); nothing else
//! in the session touches the queue or the token.
//!
//! The phases:
//!
//! ```text
//!            submit                  finish, nothing waits
//!   Idle ──────────────▶ Running ─────────────────────────▶ Idle
//!                        │  ▲  submit: the prompt waits
//!                        │  │  take_steering / take_follow_up / finish:
//!                        └──┘  the run takes a waiting prompt in
//! ```
//!
//! `cancel` may come in any phase: it answers every waiting prompt and
//! cancels the token of the work going on (a run, `/compact`, a workflow);
//! the run then finishes as usual, with `cancelled`. `cancel_one` stops one
//! prompt and leaves the others (the gateway's `chat.abort` of one run): a
//! waiting one is answered `cancelled`, the one the run works for cancels
//! the work and the waiting prompts run next; one not here yet (its request
//! still on its way in) is remembered, and answered `cancelled` when it
//! arrives.
//!
//! Which request answers when: a `session/prompt` that arrives while a run
//! is busy is queued, not refused. When the run takes it in (steering:
//! after the running tool; follow-up: when the run would have ended), the
//! request whose message the run was working on answers `end_turn`, and
//! the run goes on for the new one, which answers when the run ends (or
//! when a later message takes over in turn). A cancel answers every
//! waiting request `cancelled`.
//!
//! The machine is generic over the reply (`R`) and the prompt (`T`) so
//! that its tests need neither a connection nor a model.

use std::collections::VecDeque;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::agent::QueueMode;

/// A prompt waiting for the running run.
pub(super) struct Waiting<R, T> {
    pub(super) reply: R,
    /// The prompt's own queue mode, else the session's.
    pub(super) mode: Option<QueueMode>,
    pub(super) prompt: T,
}

/// A waiting prompt the run takes in: `done` is the reply of the request
/// the run was working on, whose part is over.
pub(super) struct Handover<R, T> {
    pub(super) done: Option<R>,
    pub(super) prompt: T,
}

/// What a submitted prompt does.
#[derive(Debug, PartialEq)]
pub(super) enum Submitted<T> {
    /// Nothing ran: the caller starts a run for it.
    Run(T),
    /// A run is busy: the prompt waits for it.
    Queued,
}

/// What [`Turns::cancel_one`] did.
#[derive(Debug, PartialEq)]
pub(super) enum CancelledOne<R> {
    /// The prompt waited: the caller answers it `cancelled`.
    Waiting(R),
    /// The run worked for it: its work is cancelled, and the run answers
    /// it as it stops.
    Running,
    /// Neither: it is remembered, in case it is still on its way in.
    Remembered,
}

/// How many prompts cancelled before they arrived [`Turns`] remembers:
/// the gateway cancels a run just after sending it at most a few at a
/// time, and a name that never arrives must not be kept for ever.
const EARLY_CANCELS: usize = 16;

/// What follows the end of a run.
pub(super) struct Finished<R, T> {
    /// The reply of the request the run answered.
    pub(super) done: Option<R>,
    /// The next prompt, which the same driver runs (the session stays
    /// running); `None`: the session is idle.
    pub(super) next: Option<T>,
}

enum Phase<R, T> {
    /// No run, nothing waiting; since when.
    Idle { since: Instant },
    /// A run is working for `current` (the request it answers; `None` once
    /// answered), and prompts may wait for it.
    Running {
        current: Option<R>,
        waiting: VecDeque<Waiting<R, T>>,
    },
}

pub(super) struct Turns<R, T> {
    /// How a waiting prompt without a mode of its own waits.
    mode: QueueMode,
    phase: Phase<R, T>,
    /// The token of the work going on (or last gone on): a run, a
    /// command. Replaced when work starts; `session/cancel` cancels it.
    cancel: CancellationToken,
    /// Prompt requests on their way in (waiting for the trust question,
    /// running a command) that are neither running nor queued yet: the
    /// session is not idle while there are any.
    arriving: usize,
    /// The names of prompts cancelled before they were submitted, oldest
    /// first (at most [`EARLY_CANCELS`]).
    early_cancels: VecDeque<String>,
}

impl<R, T> Turns<R, T> {
    pub(super) fn new(mode: QueueMode) -> Self {
        Self {
            mode,
            phase: Phase::Idle {
                since: Instant::now(),
            },
            cancel: CancellationToken::new(),
            arriving: 0,
            early_cancels: VecDeque::new(),
        }
    }

    /// A prompt request comes in; [`Turns::leave`] when it has been
    /// submitted or answered.
    pub(super) fn arrive(&mut self) {
        self.arriving += 1;
    }

    /// A prompt request that [`Turns::arrive`]d is in the queue or done;
    /// the idle time starts now.
    pub(super) fn leave(&mut self) {
        self.arriving = self.arriving.saturating_sub(1);
        self.touch();
    }

    pub(super) fn mode(&self) -> QueueMode {
        self.mode
    }

    pub(super) fn set_mode(&mut self, mode: QueueMode) {
        self.mode = mode;
    }

    /// A prompt arrives: it runs now if nothing does, else it waits.
    pub(super) fn submit(&mut self, reply: R, mode: Option<QueueMode>, prompt: T) -> Submitted<T> {
        match &mut self.phase {
            Phase::Idle { .. } => {
                self.phase = Phase::Running {
                    current: Some(reply),
                    waiting: VecDeque::new(),
                };
                Submitted::Run(prompt)
            }
            Phase::Running { waiting, .. } => {
                waiting.push_back(Waiting {
                    reply,
                    mode,
                    prompt,
                });
                Submitted::Queued
            }
        }
    }

    /// The run could not start (its task was refused): the session is idle
    /// again, and the caller answers the request with the error.
    pub(super) fn not_started(&mut self) -> Option<R> {
        match std::mem::replace(
            &mut self.phase,
            Phase::Idle {
                since: Instant::now(),
            },
        ) {
            Phase::Running { current, .. } => current,
            Phase::Idle { .. } => None,
        }
    }

    /// The run ended: its request is answered by the caller, and the
    /// first waiting prompt (if any) is run next by the same driver.
    pub(super) fn finish(&mut self) -> Finished<R, T> {
        let Phase::Running { current, waiting } = &mut self.phase else {
            return Finished {
                done: None,
                next: None,
            };
        };
        let done = current.take();
        match waiting.pop_front() {
            Some(next) => {
                *current = Some(next.reply);
                Finished {
                    done,
                    next: Some(next.prompt),
                }
            }
            None => {
                self.phase = Phase::Idle {
                    since: Instant::now(),
                };
                Finished { done, next: None }
            }
        }
    }

    fn steers(&self, waiting: &Waiting<R, T>) -> bool {
        waiting.mode.unwrap_or(self.mode) == QueueMode::Steer
    }

    /// Whether a waiting prompt should steer the run.
    pub(super) fn steering_waiting(&self) -> bool {
        match &self.phase {
            Phase::Running { waiting, .. } => waiting.iter().any(|w| self.steers(w)),
            Phase::Idle { .. } => false,
        }
    }

    /// The run takes in the waiting prompts up to the last one that
    /// steers: follow-ups sent before a steering message go in with it, so
    /// the model reads the messages in the order they were sent.
    pub(super) fn take_steering(&mut self) -> Vec<Handover<R, T>> {
        let count = match &self.phase {
            Phase::Running { waiting, .. } => waiting
                .iter()
                .rposition(|w| self.steers(w))
                .map_or(0, |last| last + 1),
            Phase::Idle { .. } => 0,
        };
        (0..count).filter_map(|_| self.take_follow_up()).collect()
    }

    /// The run, about to end, takes in the first waiting prompt.
    pub(super) fn take_follow_up(&mut self) -> Option<Handover<R, T>> {
        let Phase::Running { current, waiting } = &mut self.phase else {
            return None;
        };
        let next = waiting.pop_front()?;
        Some(Handover {
            done: current.replace(next.reply),
            prompt: next.prompt,
        })
    }

    /// Work starts (a run, a command): its own token, which `cancel`
    /// reaches.
    pub(super) fn start_work(&mut self) -> CancellationToken {
        self.cancel = CancellationToken::new();
        self.cancel.clone()
    }

    /// `session/cancel`: the work going on stops, and every waiting prompt
    /// is handed back for the caller to answer `cancelled`. The request
    /// the run answers stays with the run, which answers it as it stops.
    pub(super) fn cancel(&mut self) -> Vec<R> {
        self.cancel.cancel();
        match &mut self.phase {
            Phase::Running { waiting, .. } => waiting.drain(..).map(|w| w.reply).collect(),
            Phase::Idle { .. } => Vec::new(),
        }
    }

    /// `session/cancel` for the one prompt named `name` (`is` tells a
    /// request by its reply): see [`CancelledOne`].
    pub(super) fn cancel_one(&mut self, name: &str, is: impl Fn(&R) -> bool) -> CancelledOne<R> {
        if let Phase::Running { current, waiting } = &mut self.phase {
            if current.as_ref().is_some_and(&is) {
                self.cancel.cancel();
                return CancelledOne::Running;
            }
            if let Some(at) = waiting.iter().position(|w| is(&w.reply))
                && let Some(found) = waiting.remove(at)
            {
                return CancelledOne::Waiting(found.reply);
            }
        }
        if self.early_cancels.len() == EARLY_CANCELS {
            self.early_cancels.pop_front();
        }
        self.early_cancels.push_back(name.to_string());
        CancelledOne::Remembered
    }

    /// Whether the prompt named `name`, about to be submitted, was
    /// cancelled before it arrived (it is forgotten then: a name comes
    /// once).
    pub(super) fn cancelled_early(&mut self, name: &str) -> bool {
        match self.early_cancels.iter().position(|n| n == name) {
            Some(at) => {
                self.early_cancels.remove(at);
                true
            }
            None => false,
        }
    }

    /// The user declined a question: the work going on stops, and the
    /// waiting prompts stay (they run next).
    pub(super) fn cancel_work(&self) {
        self.cancel.cancel();
    }

    /// How many prompts wait for the running run.
    pub(super) fn waiting(&self) -> usize {
        match &self.phase {
            Phase::Running { waiting, .. } => waiting.len(),
            Phase::Idle { .. } => 0,
        }
    }

    /// Since when no run has gone on and no prompt has come in (`None`:
    /// one goes on now, or is on its way in).
    pub(super) fn idle_since(&self) -> Option<Instant> {
        match self.phase {
            Phase::Idle { since } if self.arriving == 0 => Some(since),
            Phase::Idle { .. } | Phase::Running { .. } => None,
        }
    }

    /// The session was used without a run (a config change, a load): it
    /// counts as idle from now.
    pub(super) fn touch(&mut self) {
        if let Phase::Idle { since } = &mut self.phase {
            *since = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    type Machine = Turns<&'static str, &'static str>;

    fn running(mode: QueueMode) -> Machine {
        let mut turns = Machine::new(mode);
        assert_eq!(turns.submit("r1", None, "p1"), Submitted::Run("p1"));
        turns
    }

    /// Each handover as (the reply done, the prompt taken in).
    type Taken = (Option<&'static str>, &'static str);

    fn dones(handovers: Vec<Handover<&'static str, &'static str>>) -> Vec<Taken> {
        handovers.into_iter().map(|h| (h.done, h.prompt)).collect()
    }

    #[test]
    fn an_idle_session_runs_a_prompt_and_a_busy_one_queues_it() {
        let mut turns = running(QueueMode::Steer);
        assert_eq!(turns.idle_since(), None);
        assert_eq!(turns.submit("r2", None, "p2"), Submitted::Queued);
        assert_eq!(turns.waiting(), 1);
    }

    #[test]
    fn finishing_runs_the_next_waiting_prompt_then_goes_idle() {
        let mut turns = running(QueueMode::FollowUp);
        turns.submit("r2", None, "p2");
        let finished = turns.finish();
        assert_eq!((finished.done, finished.next), (Some("r1"), Some("p2")));
        assert_eq!(turns.idle_since(), None, "still running p2");
        let finished = turns.finish();
        assert_eq!((finished.done, finished.next), (Some("r2"), None));
        assert!(turns.idle_since().is_some());
        // Idle again: the next prompt runs at once.
        assert_eq!(turns.submit("r3", None, "p3"), Submitted::Run("p3"));
    }

    #[test]
    fn steering_follows_the_session_mode_unless_the_prompt_has_its_own() {
        let mut turns = running(QueueMode::FollowUp);
        turns.submit("r2", None, "p2");
        assert!(!turns.steering_waiting());
        turns.submit("r3", Some(QueueMode::Steer), "p3");
        assert!(turns.steering_waiting());
        let mut turns2 = running(QueueMode::Steer);
        turns2.submit("r2", Some(QueueMode::FollowUp), "p2");
        assert!(!turns2.steering_waiting());
    }

    #[test]
    fn steering_takes_the_prompts_up_to_the_last_steering_one_in_order() {
        let mut turns = running(QueueMode::FollowUp);
        turns.submit("r2", None, "p2");
        turns.submit("r3", Some(QueueMode::Steer), "p3");
        turns.submit("r4", None, "p4");
        // p2 (a follow-up sent first) goes in with p3; each request that
        // is done is handed back: r1 when p2 comes in, r2 when p3 does.
        assert_eq!(
            dones(turns.take_steering()),
            vec![(Some("r1"), "p2"), (Some("r2"), "p3")]
        );
        assert_eq!(turns.waiting(), 1);
        assert!(!turns.steering_waiting());
        // The follow-up comes when the run would end; the run answers r4.
        assert_eq!(
            dones(turns.take_follow_up().into_iter().collect()),
            vec![(Some("r3"), "p4")]
        );
        let finished = turns.finish();
        assert_eq!((finished.done, finished.next), (Some("r4"), None));
    }

    #[test]
    fn cancel_hands_back_every_waiting_prompt_and_cancels_the_work() {
        let mut turns = running(QueueMode::Steer);
        let token = turns.start_work();
        turns.submit("r2", None, "p2");
        turns.submit("r3", None, "p3");
        assert_eq!(turns.cancel(), vec!["r2", "r3"]);
        assert!(token.is_cancelled());
        assert_eq!(turns.waiting(), 0);
        // The run answers its own request as it stops, then goes idle.
        let finished = turns.finish();
        assert_eq!((finished.done, finished.next), (Some("r1"), None));
        assert!(turns.idle_since().is_some());
    }

    #[test]
    fn new_work_gets_a_fresh_token_that_an_old_cancel_did_not_reach() {
        let mut turns = Machine::new(QueueMode::Steer);
        turns.cancel();
        let token = turns.start_work();
        assert!(!token.is_cancelled());
        turns.cancel_work();
        assert!(token.is_cancelled());
    }

    #[test]
    fn cancelling_a_waiting_prompt_hands_back_that_one_alone() {
        let mut turns = running(QueueMode::FollowUp);
        let token = turns.start_work();
        turns.submit("r2", None, "p2");
        turns.submit("r3", None, "p3");
        assert_eq!(
            turns.cancel_one("r2", |r| *r == "r2"),
            CancelledOne::Waiting("r2")
        );
        assert!(!token.is_cancelled());
        assert_eq!(turns.waiting(), 1);
        let finished = turns.finish();
        assert_eq!((finished.done, finished.next), (Some("r1"), Some("p3")));
    }

    #[test]
    fn cancelling_the_running_prompt_cancels_its_work_and_the_queue_runs_next() {
        let mut turns = running(QueueMode::FollowUp);
        let token = turns.start_work();
        turns.submit("r2", None, "p2");
        assert_eq!(
            turns.cancel_one("r1", |r| *r == "r1"),
            CancelledOne::Running
        );
        assert!(token.is_cancelled());
        assert_eq!(turns.waiting(), 1);
        let finished = turns.finish();
        assert_eq!((finished.done, finished.next), (Some("r1"), Some("p2")));
        // The next prompt's work has a token of its own.
        assert!(!turns.start_work().is_cancelled());
    }

    #[test]
    fn a_prompt_cancelled_before_it_arrives_is_answered_when_it_does_and_only_then() {
        let mut turns = running(QueueMode::FollowUp);
        let token = turns.start_work();
        assert_eq!(
            turns.cancel_one("r9", |r| *r == "r9"),
            CancelledOne::Remembered
        );
        assert!(!token.is_cancelled());
        assert!(!turns.cancelled_early("r2"));
        assert!(turns.cancelled_early("r9"));
        assert!(
            !turns.cancelled_early("r9"),
            "a name is forgotten once used"
        );
        // What it remembers is bounded: the oldest names go first.
        for i in 0..=EARLY_CANCELS {
            turns.cancel_one(&format!("x{i}"), |_| false);
        }
        assert!(!turns.cancelled_early("x0"));
        assert!(turns.cancelled_early(&format!("x{EARLY_CANCELS}")));
    }

    #[test]
    fn declining_a_question_cancels_the_work_but_keeps_the_queue() {
        let mut turns = running(QueueMode::Steer);
        let token = turns.start_work();
        turns.submit("r2", None, "p2");
        turns.cancel_work();
        assert!(token.is_cancelled());
        assert_eq!(turns.waiting(), 1);
    }

    #[test]
    fn a_run_that_cannot_start_leaves_the_session_idle() {
        let mut turns = running(QueueMode::Steer);
        assert_eq!(turns.not_started(), Some("r1"));
        assert!(turns.idle_since().is_some());
        assert_eq!(turns.submit("r2", None, "p2"), Submitted::Run("p2"));
    }

    #[test]
    fn an_idle_session_takes_nothing_in() {
        let mut turns = Machine::new(QueueMode::Steer);
        assert!(turns.take_follow_up().is_none());
        assert!(turns.take_steering().is_empty());
        assert!(turns.cancel().is_empty());
        let finished = turns.finish();
        assert_eq!((finished.done, finished.next), (None, None));
    }

    #[test]
    fn a_prompt_on_its_way_in_keeps_the_session_from_being_idle() {
        let mut turns = Machine::new(QueueMode::Steer);
        turns.arrive();
        turns.arrive();
        assert_eq!(turns.idle_since(), None);
        turns.leave();
        assert_eq!(turns.idle_since(), None);
        turns.leave();
        assert!(turns.idle_since().is_some());
    }

    #[test]
    fn touching_a_busy_session_leaves_it_busy() {
        let mut busy = running(QueueMode::Steer);
        busy.touch();
        assert_eq!(busy.idle_since(), None);
    }
}
