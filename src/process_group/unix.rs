//! Process groups and signals through `nix`.

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg};

pub use nix::sys::signal::Signal;
pub use nix::unistd::Pid;

/// Sends `signal` to every process of the group. ESRCH (nothing left) is
/// fine: the group id stays reserved while any member lives, so this cannot
/// reach an unrelated group in practice.
pub fn signal_group(pgid: Pid, signal: Signal) {
    let _ = killpg(pgid, signal);
}

/// Whether any process of the group is left (zombies included).
pub fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// Whether a process with this pid exists (it may belong to another user).
pub fn process_exists(pid: i32) -> bool {
    !matches!(kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

/// The real user id, for checks of who owns a file.
pub fn current_uid() -> Option<u32> {
    Some(nix::unistd::getuid().as_raw())
}

/// Makes the command's process the leader of a new process group, so that
/// [`signal_group`] with its pid reaches everything it starts.
pub fn isolate(command: &mut tokio::process::Command) {
    command.process_group(0);
}
