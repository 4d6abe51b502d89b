//! Ending everything a command started, including what escaped its process
//! group, and reaping what pincer adopts as a subreaper.
//!
//! A command's shell leads its own session and process group, so killing
//! the group ends pipelines and background jobs. A descendant can leave
//! both (`setsid`, or `set -m` job control) and would outlive the command,
//! the session and pincer. So every shell is started with a tag in its
//! environment ([`TAG_VARIABLE`]) that its descendants inherit, and when
//! the command ends, [`kill_command`] also kills every process of the
//! shell's session and every process whose environment carries the tag.
//!
//! On Linux, pincer also makes itself a child subreaper
//! ([`become_subreaper`]): a descendant whose parent dies is re-parented to
//! pincer instead of init, so it stays in pincer's tree until its command
//! ends. Adopted processes must then be reaped by pincer, or they stay
//! zombies; but the tools' shells (waited on by portable-pty) and the
//! processes tokio spawns (MCP servers, hooks) are pincer's children too,
//! and reaping one of them would steal its exit status from the code
//! waiting on it, or let that code signal a recycled pid. So the reaper
//! thread only waits for zombie children it can prove pincer did not fork:
//! - a member of a process group whose leader is another process, and not
//!   pincer's own group (every child pincer forks leads its own group —
//!   `setsid` for shells, `process_group(0)` for MCP servers and hooks — or
//!   stays in pincer's);
//! - a process of a known shell's session that is not the shell;
//! - a process recorded (pid and start time) while it was alive and
//!   carried a command's tag, unless it is a registered shell.
//!
//! Shells are registered by [`spawn_registered`] under a lock the reaper's
//! scans also take, so a scan never sees a shell before it is registered.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The variable that marks a command's processes.
pub(crate) const TAG_VARIABLE: &str = "PINCER_COMMAND_TAG";

/// How often the reaper looks for zombies when nobody asks earlier, while
/// commands run.
const REAP_INTERVAL: Duration = Duration::from_secs(1);

/// The same when no command runs and none ended within [`RECENT`].
const IDLE_REAP_INTERVAL: Duration = Duration::from_secs(30);

/// How long after a command ended its escaped processes may still turn
/// into zombies worth reaping promptly.
const RECENT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Registry {
    /// Shells portable-pty waits on: never reaped here. Their pid is also
    /// their session id.
    shells: HashSet<i32>,
    /// Sessions of shells started in this process, whose other members are
    /// adopted when re-parented here.
    sessions: HashSet<i32>,
    /// Processes seen alive with a command's tag: pid → start time.
    tagged: HashMap<i32, u64>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default).lock()
}

/// Held while a shell is being started and while the reaper scans.
fn spawn_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
}

/// Wakes the reaper thread before its interval.
struct Wake {
    pending: Mutex<bool>,
    signal: Condvar,
}

fn wake() -> &'static Wake {
    static WAKE: OnceLock<Wake> = OnceLock::new();
    WAKE.get_or_init(|| Wake {
        pending: Mutex::new(false),
        signal: Condvar::new(),
    })
}

/// A registered shell; dropping it (once the shell has been waited for)
/// forgets it.
#[derive(Debug)]
pub(crate) struct ShellRegistration {
    pid: i32,
}

impl ShellRegistration {
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }
}

impl Drop for ShellRegistration {
    fn drop(&mut self) {
        registry().shells.remove(&self.pid);
    }
}

/// Runs `spawn` (which starts a shell and returns it with its pid) so that
/// the reaper never sees the shell unregistered.
pub(crate) fn spawn_registered<T>(
    spawn: impl FnOnce() -> Result<(T, i32), String>,
) -> Result<(T, ShellRegistration), String> {
    start_reaping();
    let _lock = spawn_lock();
    let (shell, pid) = spawn()?;
    let mut registry = registry();
    registry.shells.insert(pid);
    registry.sessions.insert(pid);
    Ok((shell, ShellRegistration { pid }))
}

/// Makes this process the reaper of its orphaned descendants. Returns
/// whether it is one (only on Linux). The thread that reaps them starts
/// with the first process pincer spawns ([`start_reaping`]), so that a
/// pincer that never runs anything keeps one thread (and its memory) less.
pub fn become_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        static BECAME: OnceLock<bool> = OnceLock::new();
        *BECAME.get_or_init(|| match nix::sys::prctl::set_child_subreaper(true) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "cannot become a child subreaper; commands' escaped descendants are re-parented to init");
                false
            }
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Starts the reaper thread, once, if this process is a subreaper: called
/// before pincer spawns a process (a command's shell, an MCP server, a
/// hook), whose orphans it may then adopt.
pub fn start_reaping() {
    #[cfg(target_os = "linux")]
    {
        static STARTED: OnceLock<()> = OnceLock::new();
        if !become_subreaper() {
            return;
        }
        STARTED.get_or_init(|| {
            let started = std::thread::Builder::new()
                .name("pincer-reaper".to_string())
                .spawn(|| {
                    let mut last_poke = std::time::Instant::now();
                    loop {
                        // An idle pincer (no command running, none ended
                        // lately) scans rarely: it sits in editors all day.
                        let busy = last_poke.elapsed() < RECENT || {
                            let r = registry();
                            !(r.shells.is_empty() && r.sessions.is_empty() && r.tagged.is_empty())
                        };
                        let interval = if busy {
                            REAP_INTERVAL
                        } else {
                            IDLE_REAP_INTERVAL
                        };
                        if wait_for_wake(interval) {
                            last_poke = std::time::Instant::now();
                        }
                        reap_adopted();
                    }
                });
            if let Err(e) = started {
                tracing::warn!(error = %e, "cannot start the reaper thread");
            }
        });
    }
}

/// Waits for a poke or `timeout`; whether it was poked.
fn wait_for_wake(timeout: Duration) -> bool {
    let wake = wake();
    let mut pending = wake.pending.lock();
    let _ = wake
        .signal
        .wait_while_for(&mut pending, |pending| !*pending, timeout);
    std::mem::replace(&mut *pending, false)
}

fn poke_reaper() {
    let wake = wake();
    *wake.pending.lock() = true;
    wake.signal.notify_one();
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    pid: i32,
    state: char,
    ppid: i32,
    pgrp: i32,
    session: i32,
    start_time: u64,
}

fn parse_stat(pid: i32, text: &str) -> Option<Stat> {
    // The command name may hold spaces and parentheses: fields start after
    // the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

fn read_stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// Every process on the machine, as far as `/proc` shows it.
fn processes() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

/// Whether the process's environment (as it was at its `exec`) has a
/// variable (`NAME=value`) that `matches`.
fn environment_has(pid: i32, matches: impl Fn(&[u8]) -> bool) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ.split(|&b| b == 0).any(matches)
}

/// SIGKILLs every process of the command whose shell is `shell` and whose
/// tag is `tag` that left the shell's process group and still runs: the
/// other groups of the shell's session and every process whose environment
/// carries the tag. The group itself (the shell included) is left to its
/// owner, which may end it gracefully.
pub(crate) fn kill_command(shell: Pid, tag: &str) {
    let shell = shell.as_raw();
    let me = std::process::id() as i32;
    let entry = format!("{TAG_VARIABLE}={tag}");
    let mut killed = Vec::new();
    // Twice: a process may fork between the scan and the kill.
    for _ in 0..2 {
        let found: Vec<Stat> = processes()
            .into_iter()
            // The shell's own group is its owner's to signal (gracefully).
            .filter(|p| p.pgrp != shell && p.pid != me && p.state != 'Z')
            .filter(|p| p.session == shell || environment_has(p.pid, |var| var == entry.as_bytes()))
            .collect();
        if found.is_empty() {
            break;
        }
        for process in found {
            if kill(Pid::from_raw(process.pid), Signal::SIGKILL).is_ok() {
                killed.push(process);
            }
        }
    }
    if !killed.is_empty() {
        let mut registry = registry();
        for process in &killed {
            if !registry.shells.contains(&process.pid) {
                registry.tagged.insert(process.pid, process.start_time);
            }
        }
        drop(registry);
        poke_reaper();
    }
}

/// Waits for every zombie child that pincer provably adopted (see the
/// module docs), and records tagged children still alive.
fn reap_adopted() {
    let _lock = spawn_lock();
    let me = std::process::id() as i32;
    let my_group = nix::unistd::getpgrp().as_raw();
    let all = processes();
    let tag_prefix = format!("{TAG_VARIABLE}=");
    let mut registry = registry();
    for child in all.iter().filter(|p| p.ppid == me) {
        if registry.shells.contains(&child.pid) {
            continue;
        }
        if child.state != 'Z' {
            if environment_has(child.pid, |var| var.starts_with(tag_prefix.as_bytes())) {
                registry.tagged.insert(child.pid, child.start_time);
            }
            continue;
        }
        let grouped = child.pgrp != child.pid && child.pgrp != my_group;
        let in_shell_session =
            child.session != child.pid && registry.sessions.contains(&child.session);
        let tagged = registry.tagged.get(&child.pid) == Some(&child.start_time);
        if grouped || in_shell_session || tagged {
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(child.pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
            registry.tagged.remove(&child.pid);
        }
    }
    // Forget what no longer exists.
    let alive: HashMap<i32, u64> = all.iter().map(|p| (p.pid, p.start_time)).collect();
    registry
        .tagged
        .retain(|pid, start| alive.get(pid) == Some(start));
    let live_sessions: HashSet<i32> = all.iter().map(|p| p.session).collect();
    let shells = registry.shells.clone();
    registry
        .sessions
        .retain(|session| shells.contains(session) || live_sessions.contains(session));
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn stat_lines_are_parsed_after_the_command_name() {
        let line = "4242 (my (odd) cmd) Z 17 4240 4200 34816 4242 4194560 105 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        assert_eq!(
            parse_stat(4242, line),
            Some(Stat {
                pid: 4242,
                state: 'Z',
                ppid: 17,
                pgrp: 4240,
                session: 4200,
                start_time: 987654,
            })
        );
        assert_eq!(parse_stat(1, "1 (init"), None);
    }

    #[test]
    fn this_process_is_found_in_proc() {
        let me = std::process::id() as i32;
        let stat = read_stat(me).unwrap();
        assert_eq!(stat.pid, me);
        assert_eq!(stat.pgrp, nix::unistd::getpgrp().as_raw());
    }
}
