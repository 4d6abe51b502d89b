//! Process trees on Windows, through `taskkill` (see the parent module for
//! why not a Job object). Written by inspection: not compiled where pincer
//! is developed.

use std::process::{Command, Stdio};

/// A process id; on Windows the root of the tree stands for the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pid(i32);

impl Pid {
    pub fn from_raw(pid: i32) -> Self {
        Self(pid)
    }

    pub fn as_raw(self) -> i32 {
        self.0
    }
}

/// The two ways pincer ends a process: ask, then force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    SIGTERM,
    SIGKILL,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::SIGTERM => "SIGTERM",
            Signal::SIGKILL => "SIGKILL",
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `taskkill /T` ends the tree rooted at `pgid`; `/F` only for SIGKILL
/// (without it, windowed programs get a close request, console programs
/// nothing, and the SIGKILL after the grace period follows).
pub fn signal_group(pgid: Pid, signal: Signal) {
    let mut command = Command::new("taskkill");
    command.arg("/T");
    if signal == Signal::SIGKILL {
        command.arg("/F");
    }
    let _ = command
        .arg("/PID")
        .arg(pgid.0.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Whether the tree's root is still running.
pub fn group_alive(pgid: Pid) -> bool {
    process_exists(pgid.0)
}

/// Whether a process with this pid exists, as `tasklist` sees it.
pub fn process_exists(pid: i32) -> bool {
    Command::new("tasklist")
        .args(["/NH", "/FO", "CSV", "/FI", &format!("PID eq {pid}")])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(&format!("\"{pid}\"")))
}

/// Files have no Unix owner id on Windows.
pub fn current_uid() -> Option<u32> {
    None
}

/// A new process group, so that a Ctrl+C meant for pincer's console does
/// not reach the child (CREATE_NEW_PROCESS_GROUP).
pub fn isolate(command: &mut tokio::process::Command) {
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    command.creation_flags(CREATE_NEW_PROCESS_GROUP);
}
