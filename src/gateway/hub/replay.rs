//! Following other replicas' runs in order, whatever the bus lost: every
//! event of a run is numbered from 1 on the replica that runs it
//! ([`super::told::Telling`]) and stored in the cluster's store as well as told on the
//! bus. A replica applies a run's events in that order ([`Following`]):
//! one it hears after a gap (it started while the run went on, or the bus
//! dropped some) is held while the missing ones are read from the store,
//! then everything is applied in order, none twice. So a replica that a
//! client reconnects to has the run's whole text and its questions, and
//! names every event as the run's own replica does.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::Hub;
use super::told::{At, Envelope, Told};

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

/// A page of a run's events read from the store, for [`Hub::follow_peers`].
struct Replayed {
    run: String,
    events: Vec<(u64, Envelope)>,
    /// The page was full: more may follow.
    full: bool,
    /// The tries so far to find the events missing before those held.
    attempt: u32,
    /// The store could not be read.
    failed: bool,
}

/// The most events read from the store at once.
const REPLAY_PAGE: usize = 2_000;
/// How long to wait before reading the store again for events not yet
/// there (their replica writes them a batch at a time), and how many
/// times: 3 seconds in all.
const REPLAY_WAIT: Duration = Duration::from_millis(25);
const REPLAY_ATTEMPTS: u32 = 120;

impl Hub {
    /// Follows what the other replicas tell: their runs' events in each
    /// run's order, the ones missed read from the store first (those of
    /// the runs in `going` from their first).
    pub(super) async fn follow_peers(
        self: Arc<Self>,
        mut events: tokio::sync::mpsc::Receiver<bytes::Bytes>,
        going: Vec<String>,
    ) {
        let (tx, mut replayed) = tokio::sync::mpsc::unbounded_channel::<Replayed>();
        let mut following: Following<Envelope> = Following::default();
        for run in going {
            if following.catch_up(&run) {
                self.read_run(run, 0, 0, tx.clone());
            }
        }
        let me = self.peers.get().map(|p| p.replica().to_string());
        loop {
            tokio::select! {
                payload = events.recv() => {
                    let Some(payload) = payload else { return };
                    let envelope = match serde_json::from_slice::<Envelope>(&payload) {
                        Ok(envelope) => envelope,
                        Err(e) => {
                            tracing::warn!(error = %e, "a malformed event on the cluster's bus");
                            continue;
                        }
                    };
                    if me.as_deref() == Some(envelope.from.as_str()) {
                        continue;
                    }
                    let Some(at) = envelope.at.clone() else {
                        self.apply_told(&mut following, envelope);
                        continue;
                    };
                    match following.arrive(&at, envelope) {
                        Arrival::Apply(envelope) => self.apply_told(&mut following, envelope),
                        Arrival::Stale | Arrival::Held => {}
                        Arrival::CatchUp { after } => self.read_run(at.run, after, 0, tx.clone()),
                    }
                }
                Some(page) = replayed.recv() => {
                    let Replayed { run, events, full, attempt, failed } = page;
                    for envelope in following.replayed(&run, events) {
                        self.apply_told(&mut following, envelope);
                    }
                    if full && !failed {
                        self.read_run(run.clone(), following.last(&run), attempt, tx.clone());
                        continue;
                    }
                    let give_up = failed || attempt >= REPLAY_ATTEMPTS;
                    let before = following.last(&run);
                    let (held, done) = following.release(&run, give_up);
                    let gap = held.first().and_then(|e| e.at.as_ref()).is_some_and(|at| at.seq > before + 1);
                    if gap {
                        tracing::warn!(run, "cluster: events of a run were not in the store; its clients here miss them");
                    }
                    for envelope in held {
                        self.apply_told(&mut following, envelope);
                    }
                    if !done {
                        self.read_run(run.clone(), following.last(&run), attempt + 1, tx.clone());
                    }
                }
            }
        }
    }

    /// Applies an event another replica told, in its place.
    fn apply_told(self: &Arc<Self>, following: &mut Following<Envelope>, envelope: Envelope) {
        if let Told::Ended { run: Some(run), .. } = &envelope.told {
            following.ended(run);
        }
        self.heard(envelope);
    }

    /// Reads `run`'s events after `after` from the store (after a pause
    /// when it is not the first try) and hands them to [`Self::follow_peers`].
    fn read_run(
        self: &Arc<Self>,
        run: String,
        after: u64,
        attempt: u32,
        tx: tokio::sync::mpsc::UnboundedSender<Replayed>,
    ) {
        let Some(sessions) = self.stored.get().map(|s| s.sessions()) else {
            let _ = tx.send(Replayed {
                run,
                events: Vec::new(),
                full: false,
                attempt,
                failed: true,
            });
            return;
        };
        tokio::spawn(async move {
            if attempt > 0 {
                tokio::time::sleep(REPLAY_WAIT).await;
            }
            let (events, full, failed) = match sessions.events(&run, after, REPLAY_PAGE).await {
                Ok(rows) => {
                    let full = rows.len() >= REPLAY_PAGE;
                    let events = rows
                        .into_iter()
                        .filter_map(|(seq, event)| {
                            serde_json::from_str::<Envelope>(&event)
                                .ok()
                                .map(|e| (seq, e))
                        })
                        .collect();
                    (events, full, false)
                }
                Err(e) => {
                    tracing::warn!(
                        run,
                        "cluster: cannot read a run's events from the store: {e}"
                    );
                    (Vec::new(), false, true)
                }
            };
            let _ = tx.send(Replayed {
                run,
                events,
                full,
                attempt,
                failed,
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: u64) -> At {
        At::of_r(seq)
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
