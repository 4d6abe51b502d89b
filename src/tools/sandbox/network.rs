//! The network namespaces sandboxed commands share: one per distinct
//! `allow_hosts` list, each held by a process of its own (with a list,
//! also the proxy to its hosts, `super::proxy`), started on first use and
//! again when gone, ended when pincer is.

use std::path::Path;
#[cfg(target_os = "linux")]
use std::path::PathBuf;

#[cfg(target_os = "linux")]
use super::SETUP_FAILED_PREFIX;
use super::{Launcher, SharedNetwork};

/// A network namespace held for sandboxed commands, and with
/// `allow_hosts` the port of its loopback where the proxy is reached.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    pub(super) network: SharedNetwork,
    pub(super) proxy: Option<u16>,
}

/// How many shared networks (one per distinct `allow_hosts`) a pincer
/// holds at most.
#[cfg(target_os = "linux")]
const MAX_NETWORKS: usize = 16;

/// The network namespace this process's sandboxed commands with the same
/// `hosts` share, started on first use and again if its holder is gone.
/// Without hosts, `Ok(None)` when it cannot be held (each command then
/// gets a namespace of its own); with hosts, the proxy to them (a process
/// of its own on this machine's network, listening on a Unix socket in
/// `dir`) and a port of the namespace's loopback carried to it, or why
/// they could not be started. The processes end when pincer does: their
/// stdin is a pipe only pincer holds.
#[cfg(target_os = "linux")]
pub(super) fn shared_network(
    launcher: &Launcher,
    hosts: &[String],
    dir: Option<&Path>,
) -> Result<Option<Held>, String> {
    use std::collections::HashMap;
    use std::process::{Child, Stdio};
    struct Holder {
        holder: Child,
        proxy: Option<Child>,
        held: Held,
    }
    impl Holder {
        fn alive(&mut self) -> bool {
            matches!(self.holder.try_wait(), Ok(None))
                && self
                    .proxy
                    .as_mut()
                    .is_none_or(|p| matches!(p.try_wait(), Ok(None)))
        }
    }
    impl Drop for Holder {
        fn drop(&mut self) {
            for child in std::iter::once(&mut self.holder).chain(self.proxy.as_mut()) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    /// The first line `child` says on stderr.
    fn said(child: &mut Child) -> String {
        let mut line = String::new();
        if let Some(err) = child.stderr.take() {
            use std::io::BufRead;
            let _ = std::io::BufReader::new(err).read_line(&mut line);
        }
        line.trim().to_string()
    }
    static HELD: std::sync::LazyLock<parking_lot::Mutex<HashMap<Vec<String>, Holder>>> =
        std::sync::LazyLock::new(Default::default);
    let mut table = HELD.lock();
    let key = hosts.to_vec();
    if let Some(h) = table.get_mut(&key) {
        if h.alive() {
            return Ok(Some(h.held));
        }
        table.remove(&key);
    }
    if table.len() >= MAX_NETWORKS {
        table.retain(|_, h| h.alive());
        if table.len() >= MAX_NETWORKS {
            return Err(format!(
                "more than {MAX_NETWORKS} different allow_hosts lists are in use"
            ));
        }
    }
    let mut proxy = None;
    let mut holder = launcher.command();
    holder.arg("--hold-network");
    if !hosts.is_empty() {
        let socket = proxy_socket(hosts, dir);
        let mut child = launcher
            .command()
            .arg("--proxy")
            .arg(&socket)
            .arg("--allow")
            .arg(serde_json::to_string(hosts).unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the sandbox's proxy: {e}"))?;
        let line = said(&mut child);
        if line != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            let why = line.strip_prefix(SETUP_FAILED_PREFIX).unwrap_or(&line);
            return Err(format!("cannot start the sandbox's proxy: {why}"));
        }
        proxy = Some(child);
        holder.arg("--forward").arg(&socket);
    }
    let child = holder
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if hosts.is_empty() => {
            tracing::debug!("the sandbox's shared network could not be held ({e})");
            return Ok(None);
        }
        Err(e) => return Err(format!("cannot hold the sandbox's network: {e}")),
    };
    let line = said(&mut child);
    let words: Vec<&str> = line.split_whitespace().collect();
    let pid = i32::try_from(child.id()).unwrap_or_default();
    let parsed = match (words.as_slice(), hosts.is_empty()) {
        ([user, net], true) => user
            .parse()
            .ok()
            .zip(net.parse().ok())
            .map(|(u, n)| (u, n, None)),
        ([user, net, port], false) => user
            .parse()
            .ok()
            .zip(net.parse().ok())
            .zip(port.parse().ok())
            .map(|((u, n), p)| (u, n, Some(p))),
        _ => None,
    };
    let mut holder = Holder {
        holder: child,
        proxy,
        held: Held {
            network: SharedNetwork {
                pid,
                user: 0,
                net: 0,
            },
            proxy: None,
        },
    };
    let Some((user, net, port)) = parsed else {
        drop(holder);
        if hosts.is_empty() {
            tracing::debug!(
                "the sandbox's shared network could not be held; each command gets its own"
            );
            return Ok(None);
        }
        let why = line.strip_prefix(SETUP_FAILED_PREFIX).unwrap_or(&line);
        return Err(format!("cannot hold the sandbox's network: {why}"));
    };
    holder.held = Held {
        network: SharedNetwork { pid, user, net },
        proxy: port,
    };
    let held = holder.held;
    table.insert(key, holder);
    Ok(Some(held))
}

/// Where the proxy of `hosts` listens: in `dir` (pincer's own, which
/// commands cannot see), else the temp dir if that path is too long for
/// a Unix socket.
#[cfg(target_os = "linux")]
fn proxy_socket(hosts: &[String], dir: Option<&Path>) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hosts.hash(&mut hasher);
    let name = format!("proxy-{}-{:x}.sock", std::process::id(), hasher.finish());
    let own = dir.map(|d| d.join("run"));
    if let Some(own) = own
        && own.join(&name).as_os_str().len() < 100
        && std::fs::create_dir_all(&own).is_ok()
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700));
        return own.join(name);
    }
    std::env::temp_dir().join(format!("pincer-{name}"))
}

#[cfg(not(target_os = "linux"))]
pub(super) fn shared_network(
    _launcher: &Launcher,
    hosts: &[String],
    _dir: Option<&Path>,
) -> Result<Option<Held>, String> {
    if !hosts.is_empty() {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            tracing::warn!(
                "[sandbox] allow_hosts works on Linux only; here commands reach no host beyond the loopback"
            );
        });
    }
    Ok(None)
}
