//! What the replicas of a team gateway tell each other on the bus about
//! their sessions ([`Envelope`], [`Told`]), and the numbers a replica
//! gives its runs' events as it tells them ([`Telling`]), which the others
//! follow them by (`replay`).

use std::collections::HashMap;

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionNotification, StopReason};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// One message on [`crate::cluster::bus::EVENTS`].
#[derive(Serialize, Deserialize)]
pub(super) struct Envelope {
    pub(super) from: String,
    pub(super) told: Told,
    /// A run's event: its number in the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) at: Option<At>,
}

/// What happened in a session, as its replica tells the others.
#[derive(Serialize, Deserialize)]
// Externally tagged: an internally tagged enum buffers its content,
// which a `RawValue` inside cannot be read from.
#[serde(rename_all = "camelCase")]
pub(super) enum Told {
    Started {
        session: String,
        key: String,
        run: String,
        text: String,
    },
    Update {
        key: String,
        notification: Box<SessionNotification>,
    },
    Ended {
        session: String,
        key: String,
        run: Option<String>,
        result: Result<StopReason, String>,
    },
    PermissionResolved {
        session: String,
        key: String,
        tool_call_id: String,
        option: Option<(String, PermissionOptionKind)>,
    },
    Closed {
        session: String,
        key: String,
    },
    /// A run asks a question: `event` is `exec.approval.requested`'s
    /// payload, `listed` its entry in `exec.approvals.list`.
    /// `phase` is the older `agent` approval event of the run, which
    /// every replica sends in its place in the run's `agent` events.
    Asked {
        id: String,
        session: String,
        key: String,
        tool_call_id: String,
        decisions: Vec<String>,
        event: Box<RawValue>,
        listed: Box<RawValue>,
        phase: Box<RawValue>,
    },
    /// It was answered (or expired): `exec.approval.resolved`'s payload.
    Settled {
        id: String,
        event: Box<RawValue>,
    },
}

/// A run's event's place: the run and its number in it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct At {
    pub run: String,
    pub seq: u64,
}

#[cfg(test)]
impl At {
    /// Event `seq` of run `r`, for the tests of the numbering and of its
    /// following.
    pub(super) fn of_r(seq: u64) -> At {
        At {
            run: "r".to_string(),
            seq,
        }
    }
}

/// The runs this replica tells of: each session's run going and the
/// number its last event had.
#[derive(Default)]
pub(super) struct Telling {
    runs: HashMap<String, (String, u64)>,
}

/// The sessions with a run going that [`Telling`] keeps at most.
const MAX_TOLD_RUNS: usize = 65_536;

impl Telling {
    /// A run of `session` starts: its first event.
    pub fn started(&mut self, session: &str, run: &str) -> At {
        if self.runs.len() >= MAX_TOLD_RUNS && !self.runs.contains_key(session) {
            self.runs.clear();
        }
        self.runs.insert(session.to_string(), (run.to_string(), 1));
        At {
            run: run.to_string(),
            seq: 1,
        }
    }

    /// The next event of `session`'s run, if one goes.
    pub fn next(&mut self, session: &str) -> Option<At> {
        let (run, seq) = self.runs.get_mut(session)?;
        *seq += 1;
        Some(At {
            run: run.clone(),
            seq: *seq,
        })
    }

    /// `session`'s run `run` ends: its last event.
    pub fn ended(&mut self, session: &str, run: Option<&str>) -> Option<At> {
        let (going, _) = self.runs.get(session)?;
        if run.is_some_and(|run| run != going) {
            return None;
        }
        let at = self.next(session);
        self.runs.remove(session);
        at
    }

    /// `session` is closed.
    pub fn closed(&mut self, session: &str) {
        self.runs.remove(session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: u64) -> At {
        At::of_r(seq)
    }

    #[test]
    fn a_run_is_told_in_numbers_from_one_and_its_end_is_its_last() {
        let mut telling = Telling::default();
        assert_eq!(telling.next("s"), None, "no run goes");
        assert_eq!(telling.started("s", "r"), at(1));
        assert_eq!(telling.next("s"), Some(at(2)));
        assert_eq!(telling.next("other"), None);
        assert_eq!(telling.ended("s", Some("another run")), None);
        assert_eq!(telling.ended("s", Some("r")), Some(at(3)));
        assert_eq!(telling.next("s"), None);
    }
}
