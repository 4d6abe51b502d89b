//! The agent's clock: what time the model is told and when a prompt cache
//! counts as expired.
//!
//! The clock is a value in [`super::AgentConfig`] rather than calls to
//! `SystemTime::now()` so that the time can be moved without waiting: the
//! prompt-cache tests and benchmark drive the real binary through a session
//! that spans an hour in a second. They do it with `PINCER_CLOCK_FILE`, a
//! hidden environment variable naming a file that holds an RFC 3339
//! instant; while it is set, that instant is "now" for the agent, and
//! writing another instant into the file moves the clock of a running
//! session. A file, not a fixed value, because a test must move the clock
//! between two prompts of one process, as a user's session does.
//!
//! The knob cannot weaken anything: this clock only decides the time line
//! the model reads with each user message and when old tool results are
//! trimmed after a cache expiry (a cost trade-off). Credentials, token
//! expiry, request signing, permissions and transcripts keep the system
//! clock. Whoever can set pincer's environment can already do far more.

use std::path::PathBuf;
use std::time::SystemTime;

/// The environment variable that points the clock at a file.
pub const CLOCK_FILE_VAR: &str = "PINCER_CLOCK_FILE";

/// Where "now" comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    file: Option<PathBuf>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that reads the instant in `file` each time it is asked
    /// (see the module documentation).
    pub fn from_file(file: PathBuf) -> Self {
        Self { file: Some(file) }
    }

    /// The clock `PINCER_CLOCK_FILE` asks for, else the system clock.
    pub fn from_env_value(value: Option<&str>) -> Self {
        match value.filter(|v| !v.is_empty()) {
            Some(path) => Self::from_file(PathBuf::from(path)),
            None => Self::system(),
        }
    }

    pub fn now(&self) -> SystemTime {
        let Some(file) = &self.file else {
            return SystemTime::now();
        };
        let read = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                text.trim()
                    .parse::<jiff::Timestamp>()
                    .map_err(|e| e.to_string())
            });
        match read {
            Ok(timestamp) => SystemTime::from(timestamp),
            Err(error) => {
                tracing::warn!(
                    file = %file.display(),
                    %error,
                    "{CLOCK_FILE_VAR} names a file without an RFC 3339 instant (like 2026-11-24T09:00:00Z); using the system clock"
                );
                SystemTime::now()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_clock_file_sets_now_and_moving_it_moves_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("now");
        std::fs::write(&file, "2026-11-24T09:00:00Z\n").unwrap();
        let clock = Clock::from_env_value(Some(file.to_str().unwrap()));
        let nine: SystemTime = "2026-11-24T09:00:00Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .into();
        assert_eq!(clock.now(), nine);
        std::fs::write(&file, "2026-11-24T10:00:00Z").unwrap();
        assert_eq!(
            clock.now().duration_since(nine).unwrap(),
            std::time::Duration::from_secs(3600)
        );
    }

    #[test]
    fn without_the_variable_or_with_a_broken_file_the_system_clock_counts() {
        assert_eq!(Clock::from_env_value(None), Clock::system());
        assert_eq!(Clock::from_env_value(Some("")), Clock::system());
        let broken = Clock::from_file(PathBuf::from("/nonexistent/pincer-clock"));
        let before = SystemTime::now();
        let now = broken.now();
        assert!(now >= before && now <= SystemTime::now());
    }
}
