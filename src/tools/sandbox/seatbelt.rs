//! The sandbox on macOS: a Seatbelt profile for `sandbox-exec -p`, written
//! from a [`Policy`] the way Linux enforces it. Nothing is allowed unless
//! said: processes may start and signal each other inside the sandbox;
//! every file may be read except the secrets; files may be written only
//! beneath the writable places (never the protected paths in them) and a
//! few devices; the network is the machine's, the loopback only, or none.
//!
//! The profile text is built and unit-tested here on every platform, but
//! it has not run on a Mac: none is available where pincer is developed.
//! Resource limits are not applied on macOS.

use std::path::Path;

use super::{Network, Policy};

/// Where `sandbox-exec` lives on every macOS.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// `path` as an SBPL string literal.
fn quoted(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A path and everything beneath it.
fn subpath(path: &Path) -> String {
    format!("(subpath {})", quoted(path))
}

/// The Seatbelt profile of `policy`.
pub fn profile(policy: &Policy) -> String {
    let mut out = String::from(
        "(version 1)\n\
         (deny default)\n\
         (allow process-exec)\n\
         (allow process-fork)\n\
         (allow signal (target same-sandbox))\n\
         (allow process-info* (target same-sandbox))\n\
         (allow sysctl-read)\n\
         (allow mach-lookup)\n\
         (allow ipc-posix-sem)\n\
         (allow ipc-posix-shm)\n\
         (allow pseudo-tty)\n\
         (allow file-ioctl (literal \"/dev/tty\") (regex #\"^/dev/ttys[0-9]+$\"))\n",
    );
    // Reads: everything but the secrets.
    out.push_str("(allow file-read*");
    if policy.deny_read.is_empty() {
        out.push_str(")\n");
    } else {
        out.push_str("\n  (require-all (subpath \"/\")");
        for path in &policy.deny_read {
            out.push_str(&format!("\n    (require-not {})", subpath(path)));
        }
        out.push_str("))\n");
    }
    // Writes: beneath each writable place, except its protected paths.
    out.push_str(
        "(allow file-write*\n  (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/tty\")\n  (regex #\"^/dev/ttys[0-9]+$\")",
    );
    for root in &policy.writable {
        let inside: Vec<&std::path::PathBuf> = policy
            .read_only
            .iter()
            .chain(&policy.deny_read)
            .filter(|p| p.starts_with(root))
            .collect();
        if inside.is_empty() {
            out.push_str(&format!("\n  {}", subpath(root)));
        } else {
            out.push_str(&format!("\n  (require-all {}", subpath(root)));
            for path in inside {
                out.push_str(&format!("\n    (require-not {})", subpath(path)));
            }
            out.push(')');
        }
    }
    out.push_str(")\n");
    match policy.network {
        Network::On => out.push_str("(allow network*)\n"),
        Network::Loopback => out.push_str(
            "(allow network-outbound (remote unix-socket))\n\
             (allow network-bind (local ip \"localhost:*\"))\n\
             (allow network-inbound (local ip \"localhost:*\"))\n\
             (allow network-outbound (remote ip \"localhost:*\"))\n",
        ),
        Network::Off => out.push_str("(allow network-outbound (remote unix-socket))\n"),
    }
    out
}

/// The command line that runs `program` confined to `policy` on macOS.
pub fn command(policy: &Policy, program: &[&str]) -> Vec<String> {
    let mut out = vec![
        SANDBOX_EXEC.to_string(),
        "-p".to_string(),
        profile(policy),
        "--".to_string(),
    ];
    out.extend(program.iter().map(|s| s.to_string()));
    out
}
