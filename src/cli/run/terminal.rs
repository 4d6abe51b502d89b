//! What a person at a terminal sees besides the answer: a spinner on
//! stderr while the model has not said anything yet, dim tool activity
//! and a closing line with tokens, cost and time. None of it when stderr
//! is piped (scripts get plain lines), and no colour under `NO_COLOR`.

use parking_lot::Mutex;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";
/// Back to the start of the line and erase it.
const CLEAR: &str = "\r\x1b[2K";

/// How stderr is drawn on.
pub struct Terminal {
    /// Stderr is a terminal: a spinner and a closing line are shown.
    pub interactive: bool,
    /// Colour is allowed (a terminal, and `NO_COLOR` unset or empty).
    pub colour: bool,
    spinner: Option<Spinner>,
}

impl Terminal {
    /// Looks at stderr and `NO_COLOR`; `show` is false for `--quiet` and
    /// the JSON formats, which get nothing of this.
    pub fn detect(show: bool) -> Self {
        let interactive = show && std::io::stderr().is_terminal();
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            interactive,
            colour: interactive && !no_colour,
            spinner: interactive.then(Spinner::start),
        }
    }

    /// Shows the spinner until [`Terminal::quiet`]: the model was called
    /// and has not answered yet.
    pub fn wait(&self) {
        if let Some(spinner) = &self.spinner {
            spinner.set(true);
        }
    }

    /// Takes the spinner off the screen before anything else is written.
    pub fn quiet(&self) {
        if let Some(spinner) = &self.spinner {
            spinner.set(false);
        }
    }

    /// A secondary line (tool activity, the closing line), dim when colour
    /// is allowed.
    pub fn dim(&self, text: &str) -> String {
        if self.colour {
            format!("{DIM}{text}{RESET}")
        } else {
            text.to_string()
        }
    }
}

#[derive(Default)]
struct SpinState {
    waiting: bool,
    drawn: bool,
    frame: usize,
}

/// A spinner drawn by its own task; the task ends with it.
struct Spinner {
    state: Arc<Mutex<SpinState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Spinner {
    fn start() -> Self {
        let state = Arc::new(Mutex::new(SpinState::default()));
        let ticking = state.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                let mut state = ticking.lock();
                if !state.waiting {
                    continue;
                }
                state.frame = (state.frame + 1) % FRAMES.len();
                state.drawn = true;
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{CLEAR}{} waiting for the model…", FRAMES[state.frame]);
                let _ = err.flush();
            }
        });
        Self { state, task }
    }

    fn set(&self, waiting: bool) {
        let mut state = self.state.lock();
        state.waiting = waiting;
        if !waiting && state.drawn {
            state.drawn = false;
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{CLEAR}");
            let _ = err.flush();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.task.abort();
        self.set(false);
    }
}
