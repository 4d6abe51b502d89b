//! Loop detection: noticing that the model is going round in circles
//! before it burns the user's budget.
//!
//! Each session keeps its last calls (30 by default), each as a hash of the
//! tool name and its canonical arguments (object keys sorted, so `{a, b}`
//! and `{b, a}` are the same call) plus a hash of what came back. Before a
//! call runs, four detectors look at that history with the new call added:
//!
//! - identical repeats: the same call, again and again;
//! - polling without progress: checking a background process (or asking
//!   for its status) and getting the same answer every time;
//! - ping-pong: two calls alternating while neither result changes;
//! - a global no-progress streak: call after call that only repeats an
//!   earlier call with an earlier result.
//!
//! The worst count decides: from the warning threshold the model gets a
//! warning appended to the result, from the block threshold the call is
//! refused with an explanation, and at the circuit breaker the run ends
//! with a message to the user.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::Value;

use crate::config::LoopSettings;

/// Which detector fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Repeat,
    PollNoProgress,
    PingPong,
    NoProgress,
}

impl Pattern {
    fn describe(self, tool: &str, count: usize) -> String {
        match self {
            Pattern::Repeat => {
                format!("you have made this exact `{tool}` call {count} times")
            }
            Pattern::PollNoProgress => format!(
                "you have polled with `{tool}` {count} times in a row and the answer has not changed"
            ),
            Pattern::PingPong => format!(
                "you have alternated between the same two calls {count} times and neither result changed"
            ),
            Pattern::NoProgress => format!(
                "your last {count} calls only repeated earlier calls and got the same results"
            ),
        }
    }
}

/// What to do with a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Run it, and append this warning to its result.
    Warn(String),
    /// Refuse it with this explanation.
    Block(String),
    /// End the run; the text is for the user.
    Break(String),
}

/// The outcome of a call that was refused before it ever ran.
const REFUSED: u64 = 0x5e5e_5e5e;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    call: u64,
    /// `None` until the call finished (or when it never ran).
    outcome: Option<u64>,
    poll: bool,
}

/// A session's detector, shared by its runs.
pub type SharedLoops = std::sync::Arc<parking_lot::Mutex<LoopDetector>>;

/// One session's recent calls.
#[derive(Debug, Default)]
pub struct LoopDetector {
    settings: LoopSettings,
    recent: VecDeque<Entry>,
    /// Calls in a row, up to the last finished one, that repeated an
    /// earlier call and got its earlier answer. Kept apart from `recent`,
    /// whose window would otherwise cap it.
    streak: usize,
}

impl LoopDetector {
    pub fn new(settings: LoopSettings) -> Self {
        Self {
            settings,
            recent: VecDeque::new(),
            streak: 0,
        }
    }

    /// Judges a call before it runs and records it; [`Self::finished`]
    /// records what it returned.
    pub fn settings(&self) -> LoopSettings {
        self.settings
    }

    pub fn check(&mut self, tool: &str, args: &Value) -> Verdict {
        if !self.settings.enabled {
            return Verdict::Ok;
        }
        let mut entry = Entry {
            call: call_hash(tool, args),
            outcome: None,
            poll: is_poll(tool, args),
        };
        let (pattern, count) = self.worst(&entry);
        let s = self.settings;
        if count >= s.block {
            // A refused call learned nothing: it counts as the same answer
            // again, so refusing does not reset the streak it belongs to.
            entry.outcome = Some(
                self.recent
                    .iter()
                    .rev()
                    .find(|e| e.call == entry.call && e.outcome.is_some())
                    .and_then(|e| e.outcome)
                    .unwrap_or(REFUSED),
            );
            self.streak += 1;
        }
        if self.recent.len() == s.history.max(1) {
            self.recent.pop_front();
        }
        self.recent.push_back(entry);
        let what = pattern.describe(tool, count);
        if count >= s.breaker {
            Verdict::Break(format!(
                "Stopped: the agent was stuck in a loop ({what}). Rephrase the request or give it more to go on."
            ))
        } else if count >= s.block {
            Verdict::Block(format!(
                "Not run: {what}, so this looks like a loop. Do not repeat it; change your approach, or stop and tell the user what is blocking you."
            ))
        } else if count >= s.warning {
            Verdict::Warn(format!(
                "Warning: {what}. If you are not making progress, change your approach instead of repeating it."
            ))
        } else {
            Verdict::Ok
        }
    }

    /// Records the result of the call last passed to [`Self::check`].
    pub fn finished(&mut self, tool: &str, args: &Value, result: &Value, is_error: bool) {
        let call = call_hash(tool, args);
        let mut h = DefaultHasher::new();
        canonical(result).hash(&mut h);
        is_error.hash(&mut h);
        let outcome = Some(h.finish());
        let Some(index) = self
            .recent
            .iter()
            .rposition(|e| e.call == call && e.outcome.is_none())
        else {
            return;
        };
        let repeated = self
            .recent
            .iter()
            .take(index)
            .any(|e| e.call == call && e.outcome == outcome);
        self.streak = if repeated { self.streak + 1 } else { 0 };
        self.recent[index].outcome = outcome;
    }

    /// The detector with the highest count for `next` added to the
    /// history; on a tie the more specific one names the pattern.
    fn worst(&self, next: &Entry) -> (Pattern, usize) {
        let history: Vec<Entry> = self.recent.iter().copied().collect();
        // The same call counts as a repeat while its answer stays what it
        // was last time: running the tests again after an edit is work.
        // Polls are left to the poll detector.
        let latest = history
            .iter()
            .rev()
            .find(|e| e.call == next.call)
            .map(|e| e.outcome);
        let repeats = match latest {
            _ if next.poll => 0,
            None => 1,
            Some(latest) => {
                1 + history
                    .iter()
                    .filter(|e| e.call == next.call && e.outcome == latest)
                    .count()
            }
        };
        // Only a call that repeats an earlier one can extend the streak.
        let no_progress = if history.iter().any(|e| e.call == next.call) {
            self.streak + 1
        } else {
            0
        };
        let counts = [
            (Pattern::PollNoProgress, poll_streak(&history, next)),
            (Pattern::PingPong, ping_pong(&history, next)),
            (Pattern::Repeat, repeats),
            (Pattern::NoProgress, no_progress),
        ];
        let mut best = counts[0];
        for candidate in counts {
            if candidate.1 > best.1 {
                best = candidate;
            }
        }
        best
    }
}

/// Consecutive polls of the same thing, ending with `next`, whose answers
/// never changed.
fn poll_streak(history: &[Entry], next: &Entry) -> usize {
    if !next.poll {
        return 0;
    }
    let mut count = 1;
    let mut outcome = None;
    for e in history.iter().rev() {
        if e.call != next.call || e.outcome.is_none() {
            break;
        }
        if outcome.is_some_and(|o| Some(o) != e.outcome) {
            break;
        }
        outcome = e.outcome;
        count += 1;
    }
    count
}

/// The length of the A, B, A, B … tail ending with `next`, as long as each
/// call's result stayed the same.
fn ping_pong(history: &[Entry], next: &Entry) -> usize {
    let n = history.len();
    if n < 1 || history[n - 1].call == next.call {
        return 0;
    }
    let (a, b) = (next.call, history[n - 1].call);
    let (mut out_a, mut out_b) = (None, None);
    let mut count = 1;
    for (i, e) in history.iter().rev().enumerate() {
        let (want, seen) = if i % 2 == 0 {
            (b, &mut out_b)
        } else {
            (a, &mut out_a)
        };
        if e.call != want || e.outcome.is_none() {
            break;
        }
        if seen.is_some_and(|o| Some(o) != e.outcome) {
            break;
        }
        *seen = e.outcome;
        count += 1;
    }
    // A single A, B is no pattern yet.
    if count < 3 { 0 } else { count }
}

/// Checking on something instead of doing something.
fn is_poll(tool: &str, args: &Value) -> bool {
    let action = args.get("action").and_then(Value::as_str).unwrap_or("");
    match tool {
        "process" => matches!(action, "poll" | "list" | "log" | "status"),
        _ => {
            let lower = tool.to_ascii_lowercase();
            lower.ends_with("status") || lower.ends_with("_poll")
        }
    }
}

fn call_hash(tool: &str, args: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    tool.hash(&mut h);
    canonical(args).hash(&mut h);
    h.finish()
}

/// JSON text with object keys sorted at every level.
fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

#[cfg(test)]
mod tests;
