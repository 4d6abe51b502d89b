//! `pincer sandbox check`: what the sandbox allows commands in a directory,
//! and proof that it holds here: it runs a few commands in it that must be
//! stopped (a write outside the project, a read of `~/.ssh`, a connection
//! to a listener on this machine's loopback) and one that must not (a
//! write inside), and says how each went.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use crate::config::Settings;
use crate::tools::sandbox::{Confinement, Network, SandboxMode};

/// One try: what it shows, the command, and whether it should work.
struct Try {
    what: String,
    script: String,
    should_work: bool,
}

/// Prints the sandbox of `cwd` (default: the current directory) and tries
/// it; returns whether it behaved as it says (an unavailable sandbox, when
/// one is configured, is a failure).
pub fn check(cwd: Option<PathBuf>) -> anyhow::Result<bool> {
    let cwd = match cwd {
        Some(dir) => dir.canonicalize().unwrap_or(dir),
        None => std::env::current_dir()?,
    };
    let settings = Settings::load_from_process(&cwd)?;
    let sandbox = crate::agent::setup::sandbox(&settings);
    let applied = sandbox.settings();
    println!("sandbox: {}", sandbox.mode().id());
    if sandbox.mode() == SandboxMode::Off {
        println!("commands run unconfined, as your own processes ([sandbox] mode = \"off\")");
        return Ok(true);
    }
    let confinement = match sandbox.confinement(&cwd) {
        Ok(Some(confinement)) => confinement,
        Ok(None) => return Ok(true),
        Err(why) => {
            println!("not available here: {why}");
            println!("commands ask before they run instead");
            return Ok(false);
        }
    };
    describe(&confinement, &applied);
    let home = settings.env("HOME").map(PathBuf::from);
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let mut tries = Vec::new();
    if sandbox.mode() == SandboxMode::WorkspaceWrite {
        let probe = format!(".pincer-sandbox-check-{}", std::process::id());
        tries.push(Try {
            what: format!("write in {}", cwd.display()),
            script: format!("echo ok > {probe} && rm {probe}"),
            should_work: true,
        });
    }
    if let Some(home) = &home
        && !confinement
            .policy
            .writable
            .iter()
            .any(|w| home.starts_with(w))
    {
        let target = home.join(format!(".pincer-sandbox-check-{}", std::process::id()));
        tries.push(Try {
            what: format!("write {}", target.display()),
            script: format!(
                "echo no > {}",
                crate::tools::shell::quote(&target.display().to_string())
            ),
            should_work: false,
        });
    }
    if let Some(home) = &home
        && home.join(".ssh").exists()
    {
        tries.push(Try {
            what: "read ~/.ssh".to_string(),
            script: "ls ~/.ssh >/dev/null".to_string(),
            should_work: false,
        });
    }
    tries.push(Try {
        what: format!("connect to 127.0.0.1:{port}, a listener of this machine"),
        script: format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
        should_work: confinement.policy.network == Network::On,
    });
    if let Some(proxy) = confinement.policy.proxy {
        tries.push(Try {
            what: "reach a host allow_hosts does not list, through the proxy".to_string(),
            script: format!(
                "exec 3<>/dev/tcp/127.0.0.1/{proxy} && printf 'CONNECT unlisted.invalid:443 HTTP/1.1\\r\\n\\r\\n' >&3 && head -c 12 <&3 | grep -q ' 200'"
            ),
            should_work: false,
        });
    }
    let mut all = true;
    for attempt in &tries {
        let (worked, said) = run(&confinement, &cwd, &attempt.script);
        let fine = worked == attempt.should_work;
        all &= fine;
        let verdict = match (worked, fine) {
            (true, true) => "allowed, as it should be".to_string(),
            (false, true) => format!("stopped, as it should be ({said})"),
            (true, false) => "ALLOWED, but the sandbox should have stopped it".to_string(),
            (false, false) => format!("STOPPED, but it should have worked ({said})"),
        };
        println!(
            "  {} {}: {verdict}",
            if fine { "✓" } else { "✗" },
            attempt.what
        );
    }
    Ok(all)
}

/// What the sandbox allows, a line each.
fn describe(confinement: &Confinement, settings: &crate::tools::sandbox::Settings) {
    let policy = &confinement.policy;
    let list = |paths: &[PathBuf]| -> String {
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("  writes: {}", list(&policy.writable));
    let protected: Vec<PathBuf> = policy
        .read_only
        .iter()
        .filter(|p| p.exists())
        .cloned()
        .collect();
    if !protected.is_empty() {
        println!("  read-only: {}", list(&protected));
    }
    let hidden: Vec<PathBuf> = policy
        .deny_read
        .iter()
        .filter(|p| p.exists())
        .cloned()
        .collect();
    println!("  unreadable: {}", list(&hidden));
    println!(
        "  network: {}",
        match policy.network {
            Network::Off => "none (only Unix sockets)".to_string(),
            Network::Loopback if policy.allow_hosts.is_empty() => {
                "its own loopback only".to_string()
            }
            Network::Loopback => format!(
                "its own loopback, and {} through pincer's proxy (port {} of that loopback)",
                policy.allow_hosts.join(", "),
                policy.proxy.unwrap_or_default()
            ),
            Network::On => "the machine's".to_string(),
        }
    );
    println!(
        "  limits: {} processes, files up to {} bytes, {} s of CPU per process",
        policy.limits.processes, policy.limits.file_size, policy.limits.cpu_seconds
    );
    println!(
        "  when it stops a command: {}",
        if settings.escape {
            "pincer asks whether to run it outside"
        } else {
            "the command fails ([sandbox] escape = false)"
        }
    );
}

/// Runs `script` with bash in `confinement`; whether it exited 0, and the
/// last line it printed.
fn run(confinement: &Confinement, cwd: &Path, script: &str) -> (bool, String) {
    let (program, args) = confinement.command("bash", &["-c".to_string(), script.to_string()]);
    match std::process::Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(output) => {
            let text = String::from_utf8_lossy(&output.stderr).to_string()
                + &String::from_utf8_lossy(&output.stdout);
            let last = text.lines().rev().find(|l| !l.trim().is_empty());
            let last = last.map(|l| l.rsplit(": ").next().unwrap_or(l).trim());
            (
                output.status.success(),
                last.unwrap_or("no output").to_string(),
            )
        }
        Err(e) => (false, format!("could not start: {e}")),
    }
}
