//! Starting `bash -c` under a pseudo-terminal as the leader of a new process
//! group, reading what the terminal prints, and ending the group.
//!
//! portable-pty calls `setsid` for the child, so the shell's pid is also the
//! id of a process group (and session) that holds everything it starts —
//! pipelines, background jobs, their children. Signalling that group rather
//! than the shell is what lets a tool stop a command completely. A terminal
//! rather than pipes because programs talk to a terminal the way they talk to
//! a person: output arrives as it is printed, prompts appear, and tools that
//! refuse to run without a TTY behave. The environment keeps colours, pagers
//! and password prompts away, since nobody is there to answer them; it is
//! the user's environment without credentials (see `env`), plus the tag by
//! which `reaper` finds the command's processes that left the group.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use crate::process_group::{Pid, Signal};
pub(crate) use crate::process_group::{group_alive, signal_group};
use portable_pty::{Child, CommandBuilder, MasterPty, PtyPair, PtySize, native_pty_system};
use tokio_util::sync::CancellationToken;

use super::env::ShellEnv;
use super::reaper::{ShellRegistration, TAG_VARIABLE, spawn_registered};

/// How often waits check on a process.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(20);

/// A shell just started on its own terminal.
pub(crate) struct Shell {
    pub child: Box<dyn Child + Send + Sync>,
    /// The shell's pid, which is also its process group (and session) id.
    pub pgid: Pid,
    /// The terminal's side we read and write; it stays open while held.
    pub master: Box<dyn MasterPty + Send>,
    /// The value of [`TAG_VARIABLE`] its processes inherit.
    pub tag: String,
    /// Keeps the reaper away from the shell; drop it once `child` has been
    /// waited for.
    pub registration: ShellRegistration,
}

/// Starts `bash -c script` in `cwd` on a new terminal `rows` high, with the
/// environment `env` lets through.
/// With `confine`, bash starts in that sandbox.
pub(crate) fn spawn(
    script: &str,
    cwd: &Path,
    rows: u16,
    env: &ShellEnv,
    confine: Option<&crate::tools::sandbox::Confinement>,
) -> Result<Shell, String> {
    let PtyPair { slave, master } = native_pty_system()
        .openpty(PtySize {
            rows,
            cols: 200,
            pixel_width: 0,
            pixel_height: 0,
        })
        .map_err(|e| format!("could not open a pseudo-terminal: {e:#}"))?;
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let mut builder = match confine {
        Some(confine) => {
            let (program, args) = confine.command("bash", &["-c".to_string(), script.to_string()]);
            let mut builder = CommandBuilder::new(program);
            builder.args(args);
            builder
        }
        None => {
            let mut builder = CommandBuilder::new("bash");
            builder.arg("-c");
            builder.arg(script);
            builder
        }
    };
    builder.cwd(cwd);
    builder.env_clear();
    for (name, value) in env.filter(std::env::vars_os()) {
        builder.env(name, value);
    }
    builder.env(TAG_VARIABLE, &tag);
    builder.env("PWD", cwd);
    builder.env("TERM", "dumb");
    builder.env("PAGER", "cat");
    builder.env("GIT_PAGER", "cat");
    builder.env("GIT_TERMINAL_PROMPT", "0");
    let (child, registration) = spawn_registered(|| {
        let mut child = slave
            .spawn_command(builder)
            .map_err(|e| format!("could not start bash: {e:#}"))?;
        let Some(pid) = child.process_id().and_then(|pid| i32::try_from(pid).ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("bash started without a process id".to_string());
        };
        Ok((child, pid))
    })?;
    // Only the process group may hold the slave side, so the terminal closes
    // (and reading it ends) when the group is gone.
    drop(slave);
    let pgid = Pid::from_raw(registration.pid());
    Ok(Shell {
        child,
        pgid,
        master,
        tag,
        registration,
    })
}

/// Reads the terminal until it closes (every process holding it has ended)
/// or `chunk` returns false. Reads block, so this runs on a thread of its own.
pub(crate) fn read_chunks(mut reader: Box<dyn Read + Send>, mut chunk: impl FnMut(&[u8]) -> bool) {
    let mut buffer = vec![0; 16 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                if !chunk(&buffer[..n]) {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// SIGTERM to the group, up to `grace` for `gone` to hold (or `cancel` to
/// fire), then SIGKILL if it does not; returns whether it held in time.
pub(crate) async fn terminate_group(
    pgid: Pid,
    grace: Duration,
    cancel: &CancellationToken,
    gone: impl FnMut() -> bool,
) -> bool {
    signal_group(pgid, Signal::SIGTERM);
    let ended = wait_until(grace, cancel, gone).await;
    if !ended {
        signal_group(pgid, Signal::SIGKILL);
    }
    ended
}

/// Checks `done` until it holds or `timeout` passes (or `cancel` fires);
/// returns whether it held.
pub(crate) async fn wait_until(
    timeout: Duration,
    cancel: &CancellationToken,
    mut done: impl FnMut() -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::select! {
            () = cancel.cancelled() => return done(),
            () = tokio::time::sleep(CHECK_INTERVAL) => {}
        }
    }
}
