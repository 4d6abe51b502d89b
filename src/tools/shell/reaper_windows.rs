//! Ending what a command left behind, on Windows. There is no subreaper and
//! no session to scan: `taskkill /T` on the shell ends the tree that still
//! hangs from it, which is what this module's Unix twin adds to killing the
//! process group. Processes whose parent already exited are not reached
//! (a Job object would be; see `crate::process_group`). Same interface as
//! `reaper.rs`; written by inspection, not compiled where pincer is
//! developed.

use crate::process_group::{Pid, Signal, signal_group};

/// The variable that marks a command's processes (kept for the same
/// environment on every platform).
pub(crate) const TAG_VARIABLE: &str = "PINCER_COMMAND_TAG";

/// A started shell; nothing to forget when it is dropped.
#[derive(Debug)]
pub(crate) struct ShellRegistration {
    pid: i32,
}

impl ShellRegistration {
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }
}

/// Runs `spawn`, which starts a shell and returns it with its pid.
pub(crate) fn spawn_registered<T>(
    spawn: impl FnOnce() -> Result<(T, i32), String>,
) -> Result<(T, ShellRegistration), String> {
    let (shell, pid) = spawn()?;
    Ok((shell, ShellRegistration { pid }))
}

/// Windows has no child subreapers.
pub fn become_subreaper() -> bool {
    false
}

/// Nothing to reap on Windows.
pub fn start_reaping() {}

/// Force-ends the tree under the command's shell.
pub(crate) fn kill_command(shell: Pid, _tag: &str) {
    signal_group(shell, Signal::SIGKILL);
}
