//! When the gateway's scheduled runs are due: `[[cron]]` jobs (cron
//! expressions, through the `croner` crate in jiff's time zones) and the
//! `[heartbeat]` (every N minutes, within active hours), and which replies
//! stay silent (`NO_REPLY`, `HEARTBEAT_OK`). Being built (issue 18); so far
//! the decisions, as functions of the time they are asked at, so that they
//! are tested with any clock.

use std::str::FromStr;
use std::time::Duration;

use croner::Cron;
use jiff::Zoned;
use jiff::civil::Time;

/// What a job does about runs it missed while the gateway was down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// Nothing: the next run is the next one on the schedule.
    Skip,
    /// One run at start, however many were missed.
    RunOnce,
}

impl FromStr for Missed {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "skip" => Ok(Self::Skip),
            "run_once" => Ok(Self::RunOnce),
            other => Err(format!(
                "`missed = \"{other}\"`: use \"skip\" or \"run_once\""
            )),
        }
    }
}

/// A cron expression, checked when the config is read.
#[derive(Clone, Debug)]
pub struct Schedule(Cron);

impl FromStr for Schedule {
    type Err = String;

    fn from_str(expression: &str) -> Result<Self, String> {
        Cron::from_str(expression.trim())
            .map(Self)
            .map_err(|e| format!("the cron expression \"{expression}\" is not valid: {e}"))
    }
}

impl Schedule {
    /// The last time on the schedule at or before `now`.
    pub fn previous(&self, now: &Zoned) -> Option<Zoned> {
        self.0.find_previous_occurrence(now, true).ok()
    }
}

/// What a job does now, and when next.
#[derive(Debug, PartialEq)]
pub struct Due {
    /// Run at once: a run was missed and the job catches up.
    pub now: bool,
    /// The next run on the schedule after `now` (none if the expression
    /// matches no time to come).
    pub next: Option<Zoned>,
}

/// A job's plan at `now`, given when it last ran (none: never, so nothing
/// was missed).
pub fn due(schedule: &Schedule, missed: Missed, last_run: Option<&Zoned>, now: &Zoned) -> Due {
    let next = schedule.0.find_next_occurrence(now, false).ok();
    let caught_up = last_run
        .and_then(|last| schedule.0.find_next_occurrence(last, false).ok())
        .is_some_and(|after_last| &after_last <= now);
    Due {
        now: caught_up && missed == Missed::RunOnce,
        next,
    }
}

/// The hours in which the heartbeat runs, in the gateway's time zone; a
/// window whose end is before its start spans midnight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveHours {
    pub start: Time,
    pub end: Time,
}

impl FromStr for ActiveHours {
    type Err = String;

    /// `"08:00-22:00"`.
    fn from_str(value: &str) -> Result<Self, String> {
        let invalid = || format!("`active_hours = \"{value}\"`: write it as \"08:00-22:00\"");
        let (start, end) = value.split_once('-').ok_or_else(invalid)?;
        let parse = |t: &str| Time::strptime("%H:%M", t.trim()).map_err(|_| invalid());
        let hours = Self {
            start: parse(start)?,
            end: parse(end)?,
        };
        if hours.start == hours.end {
            return Err(format!(
                "`active_hours = \"{value}\"` is empty; leave it out to run at any hour"
            ));
        }
        Ok(hours)
    }
}

impl ActiveHours {
    pub fn contains(&self, time: Time) -> bool {
        if self.start < self.end {
            self.start <= time && time < self.end
        } else {
            time >= self.start || time < self.end
        }
    }
}

/// When the next heartbeat is due: `every` after the last one (or after
/// `now` when there was none, or at once when that time has passed),
/// moved to the next start of the active hours when it falls outside them.
/// `None` when `every` is zero (the heartbeat is off).
pub fn next_heartbeat(
    every: Duration,
    active: Option<ActiveHours>,
    last: Option<&Zoned>,
    now: &Zoned,
) -> Option<Zoned> {
    if every.is_zero() {
        return None;
    }
    let span = jiff::SignedDuration::try_from(every).ok()?;
    let wanted = match last {
        Some(last) => last.checked_add(span).ok()?,
        None => now.checked_add(span).ok()?,
    };
    let wanted = if &wanted < now { now.clone() } else { wanted };
    let Some(hours) = active else {
        return Some(wanted);
    };
    if hours.contains(wanted.time()) {
        return Some(wanted);
    }
    // The window's next start: today's, or tomorrow's once today's passed.
    let today = wanted.date().to_zoned(wanted.time_zone().clone()).ok()?;
    let start = today.with().time(hours.start).build().ok()?;
    if start > wanted {
        Some(start)
    } else {
        start.checked_add(jiff::Span::new().days(1)).ok()
    }
}

/// The longest acknowledgement text a heartbeat reply may carry beside
/// `HEARTBEAT_OK` and still be silent (OpenClaw's `ackMaxChars`).
const ACK_MAX_CHARS: usize = 300;

/// A reply that is never sent to a channel: `NO_REPLY` as the whole
/// message, or `HEARTBEAT_OK` at its start or end with at most a short
/// acknowledgement beside it.
pub fn is_silent(reply: &str) -> bool {
    let reply = reply.trim();
    if reply == crate::context::SILENT_REPLY {
        return true;
    }
    let rest = reply
        .strip_prefix("HEARTBEAT_OK")
        .or_else(|| reply.strip_suffix("HEARTBEAT_OK"));
    rest.is_some_and(|rest| rest.trim().chars().count() <= ACK_MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> Zoned {
        format!("{text}[Europe/Berlin]").parse().unwrap()
    }

    #[test]
    fn a_bad_expression_or_setting_is_named() {
        let error = Schedule::from_str("61 * * * *").unwrap_err();
        assert!(error.contains("\"61 * * * *\" is not valid"), "{error}");
        assert!(Missed::from_str("always").unwrap_err().contains("run_once"));
        assert!(ActiveHours::from_str("8-22").is_err());
        assert!(
            ActiveHours::from_str("08:00-08:00")
                .unwrap_err()
                .contains("empty")
        );
    }

    #[test]
    fn the_next_run_follows_the_expression() {
        let hourly: Schedule = "0 * * * *".parse().unwrap();
        let now = at("2026-11-24T10:15:00");
        assert_eq!(
            due(&hourly, Missed::RunOnce, None, &now),
            Due {
                now: false,
                next: Some(at("2026-11-24T11:00:00")),
            }
        );
    }

    #[test]
    fn a_missed_run_is_caught_up_once_or_skipped() {
        let daily: Schedule = "30 7 * * *".parse().unwrap();
        // Down from Monday evening to Thursday noon: three runs missed.
        let last = at("2026-11-23T07:30:00");
        let now = at("2026-11-26T12:00:00");
        let next = Some(at("2026-11-27T07:30:00"));
        assert_eq!(
            due(&daily, Missed::RunOnce, Some(&last), &now),
            Due {
                now: true,
                next: next.clone(),
            }
        );
        assert_eq!(
            due(&daily, Missed::Skip, Some(&last), &now),
            Due { now: false, next }
        );
        // Nothing missed: the run after the last one is still to come.
        let last = at("2026-11-26T07:30:00");
        assert!(!due(&daily, Missed::RunOnce, Some(&last), &now).now);
    }

    #[test]
    fn the_heartbeat_keeps_its_interval_and_its_hours() {
        let every = Duration::from_secs(30 * 60);
        let now = at("2026-11-24T10:00:00");
        assert_eq!(next_heartbeat(Duration::ZERO, None, None, &now), None);
        assert_eq!(
            next_heartbeat(every, None, None, &now),
            Some(at("2026-11-24T10:30:00"))
        );
        // Overdue (the gateway was down): at once.
        let last = at("2026-11-24T08:00:00");
        assert_eq!(
            next_heartbeat(every, None, Some(&last), &now),
            Some(now.clone())
        );
        let day: ActiveHours = "08:00-22:00".parse().unwrap();
        let late = at("2026-11-24T21:45:00");
        assert_eq!(
            next_heartbeat(every, Some(day), None, &late),
            Some(at("2026-11-25T08:00:00"))
        );
        let early = at("2026-11-24T06:00:00");
        assert_eq!(
            next_heartbeat(every, Some(day), None, &early),
            Some(at("2026-11-24T08:00:00"))
        );
        // A night window spans midnight.
        let night: ActiveHours = "22:00-06:00".parse().unwrap();
        assert!(night.contains(Time::constant(23, 0, 0, 0)));
        assert!(night.contains(Time::constant(5, 59, 0, 0)));
        assert!(!night.contains(Time::constant(12, 0, 0, 0)));
        assert_eq!(
            next_heartbeat(every, Some(night), None, &now),
            Some(at("2026-11-24T22:00:00"))
        );
    }

    #[test]
    fn silent_replies_are_known() {
        assert!(is_silent("NO_REPLY"));
        assert!(is_silent("  NO_REPLY\n"));
        assert!(!is_silent("NO_REPLY, but here is why"));
        assert!(is_silent("HEARTBEAT_OK"));
        assert!(is_silent("All quiet. HEARTBEAT_OK"));
        assert!(is_silent("HEARTBEAT_OK nothing to report"));
        assert!(!is_silent(&format!("HEARTBEAT_OK {}", "x".repeat(301))));
        assert!(!is_silent(
            "The build failed; HEARTBEAT_OK is not the answer here."
        ));
    }
}
