//! Following other replicas' runs in order, whatever the bus lost: every
//! event of a run is numbered from 1 on the replica that runs it
//! ([`Telling`]) and stored in the cluster's store as well as told on the
//! bus. A replica applies a run's events in that order ([`Following`]):
//! one it hears after a gap (it started while the run went on, or the bus
//! dropped some) is held while the missing ones are read from the store,
//! then everything is applied in order, none twice. So a replica that a
//! client reconnects to has the run's whole text and its questions, and
//! names every event as the run's own replica does.

use std::collections::{HashMap, HashSet, VecDeque};

/// A run's event's place: the run and its number in it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct At {
    pub run: String,
    pub seq: u64,
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

/// What to do with a run's event just heard.
#[derive(Debug, PartialEq)]
pub(super) enum Arrival<E> {
    /// It is the next: apply it.
    Apply(E),
    /// Heard already, or its run ended: drop it.
    Stale,
    /// Held until the ones before it are read.
    Held,
    /// Held; the events after `after` must be read from the store.
    CatchUp { after: u64 },
}

/// The other replicas' runs as this replica follows them.
pub(super) struct Following<E> {
    runs: HashMap<String, Followed<E>>,
    order: VecDeque<String>,
    ended: HashSet<String>,
    ended_order: VecDeque<String>,
}

struct Followed<E> {
    /// The last event applied.
    last: u64,
    /// Events heard while catching up, by number: `Some` while the store
    /// is being read.
    held: Option<Vec<(u64, E)>>,
}

/// The runs followed, and the ended runs remembered, at most.
const MAX_FOLLOWED: usize = 65_536;
const MAX_ENDED: usize = 16_384;

impl<E> Default for Following<E> {
    fn default() -> Self {
        Self {
            runs: HashMap::new(),
            order: VecDeque::new(),
            ended: HashSet::new(),
            ended_order: VecDeque::new(),
        }
    }
}

impl<E> Following<E> {
    fn entry(&mut self, run: &str) -> &mut Followed<E> {
        if !self.runs.contains_key(run) {
            while self.runs.len() >= MAX_FOLLOWED {
                let Some(oldest) = self.order.pop_front() else {
                    break;
                };
                self.runs.remove(&oldest);
            }
            self.order.push_back(run.to_string());
            // Ended runs leave `order` lazily: dropped here when it holds
            // many of them.
            if self.order.len() > 2 * MAX_FOLLOWED {
                let runs = &self.runs;
                self.order.retain(|r| runs.contains_key(r));
            }
        }
        self.runs.entry(run.to_string()).or_insert(Followed {
            last: 0,
            held: None,
        })
    }

    /// The run's event `seq` was heard on the bus.
    pub fn arrive(&mut self, at: &At, event: E) -> Arrival<E> {
        if self.ended.contains(&at.run) {
            return Arrival::Stale;
        }
        let followed = self.entry(&at.run);
        if at.seq <= followed.last {
            return Arrival::Stale;
        }
        if let Some(held) = &mut followed.held {
            held.push((at.seq, event));
            return Arrival::Held;
        }
        if at.seq == followed.last + 1 {
            followed.last = at.seq;
            return Arrival::Apply(event);
        }
        followed.held = Some(vec![(at.seq, event)]);
        Arrival::CatchUp {
            after: followed.last,
        }
    }

    /// Starts catching up with `run` from its first event (a run going
    /// on elsewhere when this replica joined). False when it is followed
    /// already.
    pub fn catch_up(&mut self, run: &str) -> bool {
        if self.ended.contains(run) || self.runs.contains_key(run) {
            return false;
        }
        self.entry(run).held = Some(Vec::new());
        true
    }

    /// The events read from the store after `last`, in order: those that
    /// come next are applied (returned, in order); the rest dropped.
    pub fn replayed(&mut self, run: &str, events: Vec<(u64, E)>) -> Vec<E> {
        let Some(followed) = self.runs.get_mut(run) else {
            return Vec::new();
        };
        let mut apply = Vec::new();
        for (seq, event) in events {
            if seq == followed.last + 1 {
                followed.last = seq;
                apply.push(event);
            }
        }
        apply
    }

    /// The last event applied of `run` (0 before its first).
    pub fn last(&self, run: &str) -> u64 {
        self.runs.get(run).map_or(0, |f| f.last)
    }

    /// Whether the store has been read up to the first event held: the
    /// held events that come next are applied (returned, in order) and
    /// true is returned when none is left held. With `give_up`, the held
    /// events are applied in order whatever is missing before them.
    pub fn release(&mut self, run: &str, give_up: bool) -> (Vec<E>, bool) {
        let Some(followed) = self.runs.get_mut(run) else {
            return (Vec::new(), true);
        };
        let Some(held) = &mut followed.held else {
            return (Vec::new(), true);
        };
        held.sort_by_key(|(seq, _)| *seq);
        let mut apply = Vec::new();
        let mut rest = Vec::new();
        for (seq, event) in held.drain(..) {
            if seq <= followed.last {
                continue;
            }
            if seq == followed.last + 1 || give_up {
                followed.last = seq;
                apply.push(event);
            } else {
                rest.push((seq, event));
            }
        }
        let done = rest.is_empty();
        followed.held = (!done).then_some(rest);
        (apply, done)
    }

    /// `run` ended: what is heard of it later is dropped.
    pub fn ended(&mut self, run: &str) {
        self.runs.remove(run);
        if self.ended.insert(run.to_string()) {
            self.ended_order.push_back(run.to_string());
            while self.ended_order.len() > MAX_ENDED {
                if let Some(oldest) = self.ended_order.pop_front() {
                    self.ended.remove(&oldest);
                }
            }
        }
    }

    /// Whether `run` is being caught up with.
    #[cfg(test)]
    pub fn catching(&self, run: &str) -> bool {
        self.runs.get(run).is_some_and(|f| f.held.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: u64) -> At {
        At {
            run: "r".to_string(),
            seq,
        }
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

    #[test]
    fn events_in_order_are_applied_and_heard_twice_are_dropped() {
        let mut following = Following::default();
        assert_eq!(following.arrive(&at(1), "a"), Arrival::Apply("a"));
        assert_eq!(following.arrive(&at(2), "b"), Arrival::Apply("b"));
        assert_eq!(following.arrive(&at(2), "b"), Arrival::Stale);
        following.ended("r");
        assert_eq!(following.arrive(&at(3), "c"), Arrival::Stale);
    }

    #[test]
    fn a_gap_holds_what_follows_until_the_store_fills_it() {
        let mut following = Following::default();
        assert_eq!(following.arrive(&at(1), "a"), Arrival::Apply("a"));
        // 2 and 3 were lost on the bus.
        assert_eq!(following.arrive(&at(4), "d"), Arrival::CatchUp { after: 1 });
        assert_eq!(following.arrive(&at(5), "e"), Arrival::Held);
        assert!(following.catching("r"));
        // The store has only 2 so far: 4 and 5 stay held.
        assert_eq!(following.replayed("r", vec![(2, "b")]), vec!["b"]);
        assert_eq!(following.release("r", false), (vec![], false));
        // Then 3 (and 4, which is dropped: it is held already).
        assert_eq!(
            following.replayed("r", vec![(3, "c"), (4, "d")]),
            vec!["c", "d"]
        );
        assert_eq!(following.release("r", false), (vec!["e"], true));
        assert!(!following.catching("r"));
        assert_eq!(following.arrive(&at(6), "f"), Arrival::Apply("f"));
    }

    #[test]
    fn a_run_joined_late_is_read_from_its_first_event() {
        let mut following: Following<&str> = Following::default();
        assert!(following.catch_up("r"));
        assert!(!following.catch_up("r"), "caught up with already");
        assert_eq!(following.arrive(&at(3), "c"), Arrival::Held);
        assert_eq!(
            following.replayed("r", vec![(1, "a"), (2, "b")]),
            vec!["a", "b"]
        );
        assert_eq!(following.release("r", false), (vec!["c"], true));
        assert_eq!(following.last("r"), 3);
    }

    #[test]
    fn what_the_store_never_gets_is_given_up_on_in_order() {
        let mut following = Following::default();
        assert_eq!(following.arrive(&at(3), "c"), Arrival::CatchUp { after: 0 });
        assert_eq!(following.arrive(&at(2), "b"), Arrival::Held);
        assert_eq!(following.release("r", true), (vec!["b", "c"], true));
        assert_eq!(following.arrive(&at(1), "a"), Arrival::Stale);
    }

    #[test]
    fn the_runs_followed_are_bounded() {
        let mut following = Following::default();
        for i in 0..MAX_FOLLOWED + 10 {
            let at = At {
                run: format!("r{i}"),
                seq: 1,
            };
            assert_eq!(following.arrive(&at, ()), Arrival::Apply(()));
        }
        assert_eq!(following.runs.len(), MAX_FOLLOWED);
        for i in 0..MAX_ENDED + 10 {
            following.ended(&format!("e{i}"));
        }
        assert_eq!(following.ended.len(), MAX_ENDED);
    }
}
