//! The sandbox commands run in: what a command may read, write and reach,
//! decided by pincer and enforced by the operating system, so that a
//! command the model runs cannot do more than the user allowed even when
//! nobody reads it first.
//!
//! `[sandbox] mode` says how much a command may change:
//! - `workspace-write` (the default): it reads the machine except the
//!   user's secrets ([`secrets`]: `~/.ssh`, `~/.aws`, `~/.gnupg`, pincer's
//!   own config and state, the credential files of other tools, the
//!   sockets of the user's agents and daemons, and `deny_read`), writes
//!   only in the working directory, the temp dir and `allow_write`, and
//!   never in the working directory's `.git/hooks`, `.git/config` or
//!   `.pincer/`;
//! - `read-only`: the same reads, writes only in the temp dir;
//! - `off`: commands run as the user's own processes, as before.
//!
//! `[sandbox] network` says what it may reach: `loopback` (the default: a
//! network of its own with only a loopback, so a test that starts a
//! server and talks to it works, while the machine's own listeners and
//! everything beyond are out of reach), `off` (no sockets but Unix ones),
//! or `on`. With `loopback`, `allow_hosts` lists hosts commands may
//! still reach, through a proxy pincer runs outside the sandbox (`proxy`,
//! Linux only). `[sandbox.limits]` bounds the processes a command may have
//! at once, the size of a file it writes and each process's CPU time.
//!
//! This module is the policy as data ([`Settings`] from the config file,
//! [`Policy`] for one command). Linux enforces it in `linux`: pincer
//! starts the command through itself (`pincer sandbox exec`), which
//! confines its own process — user, mount and network namespaces,
//! Landlock, seccomp, resource limits — and then becomes the command, so
//! pincer itself is never confined and no unsafe code runs between fork
//! and exec. macOS's Seatbelt profile is written by `seatbelt`. Windows
//! has no sandbox: commands ask as they did.

#[cfg(target_os = "linux")]
pub mod linux;
mod network;
#[cfg(unix)]
pub mod proxy;
pub mod seatbelt;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How much a sandboxed command may change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Writes only in the temp dir.
    ReadOnly,
    /// Writes in the working directory, the temp dir and `allow_write`.
    #[default]
    WorkspaceWrite,
    /// No sandbox.
    Off,
}

impl SandboxMode {
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::WorkspaceWrite,
        SandboxMode::ReadOnly,
        SandboxMode::Off,
    ];

    pub fn id(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Off => "off",
        }
    }

    pub fn parse(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "Sandbox: read-only",
            SandboxMode::WorkspaceWrite => "Sandbox: workspace",
            SandboxMode::Off => "No sandbox",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => {
                "Commands read the machine (not your secrets) and write only to temp"
            }
            SandboxMode::WorkspaceWrite => {
                "Commands write only in the project and temp, never read your secrets"
            }
            SandboxMode::Off => "Commands run unconfined, as your own processes",
        }
    }

    /// How much it allows: a project may only choose a mode allowing no
    /// more than the user's.
    pub fn leniency(self) -> u8 {
        match self {
            SandboxMode::ReadOnly => 0,
            SandboxMode::WorkspaceWrite => 1,
            SandboxMode::Off => 2,
        }
    }
}

/// What a sandboxed command may reach over the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// No sockets but Unix ones.
    Off,
    /// A network of its own with only a loopback interface.
    #[default]
    Loopback,
    /// The machine's network.
    On,
}

impl Network {
    pub fn id(self) -> &'static str {
        match self {
            Network::Off => "off",
            Network::Loopback => "loopback",
            Network::On => "on",
        }
    }

    pub fn leniency(self) -> u8 {
        match self {
            Network::Off => 0,
            Network::Loopback => 1,
            Network::On => 2,
        }
    }
}

/// `[sandbox.limits]`: bounds on one command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Processes the command may have at once (default 1,024).
    pub processes: Option<u64>,
    /// Largest file it may write, in bytes or as "512 MiB", "2 GB"
    /// (default 1 GiB).
    pub file_size: Option<ByteSize>,
    /// CPU seconds each of its processes may use (default 3,600).
    pub cpu_seconds: Option<u64>,
}

pub use crate::units::ByteSize;

/// `[sandbox]` in a config file. Every key is optional: what is unset
/// comes from the layer below (the user's file, then the defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// `workspace-write` (default), `read-only` or `off`.
    pub mode: Option<SandboxMode>,
    /// `loopback` (default), `off` or `on`.
    pub network: Option<Network>,
    /// Hosts a command may reach with `network = "loopback"`, through
    /// pincer's proxy: `example.com`, `*.example.com` (its subdomains) or
    /// an address.
    pub allow_hosts: Option<Vec<HostPattern>>,
    /// More places commands may write (`~` for the home directory).
    pub allow_write: Vec<String>,
    /// More places commands may not read (`~` for the home directory).
    pub deny_read: Vec<String>,
    pub limits: LimitsConfig,
    /// Whether a command the sandbox stopped may be run outside it after
    /// the user says yes (default true; sessions nobody watches never ask).
    pub escape: Option<bool>,
    /// `[sandbox.by_provider."<provider>"]` or `."<provider>/<model>"`:
    /// keys over these for the sessions running that provider's or that
    /// model's turns (the model's over the provider's), as `[tools]`
    /// has.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub by_provider: std::collections::BTreeMap<String, SandboxConfig>,
}

/// One `allow_hosts` entry, checked when the file is read
/// ([`proxy::pattern`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct HostPattern(pub String);

impl<'de> Deserialize<'de> for HostPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        host_pattern(&text)
            .map(HostPattern)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(unix)]
fn host_pattern(text: &str) -> Result<String, String> {
    proxy::pattern(text)
}

#[cfg(not(unix))]
fn host_pattern(text: &str) -> Result<String, String> {
    Ok(text.trim().to_ascii_lowercase())
}

/// Whether `entry` allows nothing `list` does not.
#[cfg(unix)]
fn host_covered(entry: &str, list: &[String]) -> bool {
    proxy::covered(entry, list)
}

#[cfg(not(unix))]
fn host_covered(entry: &str, list: &[String]) -> bool {
    list.iter().any(|l| l == entry)
}

/// Both lists, `over`'s after `base`'s; either alone as it is.
fn joined(
    base: &Option<Vec<HostPattern>>,
    over: &Option<Vec<HostPattern>>,
) -> Option<Vec<HostPattern>> {
    match (base, over) {
        (Some(base), Some(over)) => {
            let mut out = base.clone();
            out.extend(over.iter().filter(|h| !base.contains(h)).cloned());
            Some(out)
        }
        (base, None) => base.clone(),
        (None, over) => over.clone(),
    }
}

impl SandboxConfig {
    /// This config with `over`'s keys over it: a key `over` sets wins; its
    /// lists are added.
    pub fn overlay(&self, over: &SandboxConfig) -> SandboxConfig {
        let mut out = self.clone();
        out.mode = over.mode.or(out.mode);
        out.network = over.network.or(out.network);
        out.allow_hosts = joined(&out.allow_hosts, &over.allow_hosts);
        out.allow_write.extend(over.allow_write.iter().cloned());
        out.deny_read.extend(over.deny_read.iter().cloned());
        out.limits.processes = over.limits.processes.or(out.limits.processes);
        out.limits.file_size = over.limits.file_size.or(out.limits.file_size);
        out.limits.cpu_seconds = over.limits.cpu_seconds.or(out.limits.cpu_seconds);
        out.escape = over.escape.or(out.escape);
        for (key, table) in &over.by_provider {
            let merged = match out.by_provider.get(key) {
                Some(base) => base.overlay(table),
                None => table.clone(),
            };
            out.by_provider.insert(key.clone(), merged);
        }
        out
    }

    /// The tables of `by_provider` that apply to `provider`'s model `id`:
    /// the provider's, then the model's.
    pub fn for_model(&self, provider: &str, id: &str) -> Vec<&SandboxConfig> {
        let full = format!("{provider}/{id}");
        let find = |wanted: &str| {
            self.by_provider
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(wanted))
                .map(|(_, table)| table)
        };
        find(provider).into_iter().chain(find(&full)).collect()
    }
}

/// What of a project's `[sandbox]` (`project`) narrows the user's
/// (`user`), and the keys that would widen it, as written, which are not
/// honoured: a stricter mode or network, lower limits, more `deny_read`,
/// `escape = false`. `allow_write` always widens.
pub fn narrowing(user: &SandboxConfig, project: &SandboxConfig) -> (SandboxConfig, Vec<String>) {
    let base = Settings::from_config(user, None);
    let mut out = SandboxConfig {
        deny_read: project.deny_read.clone(),
        ..SandboxConfig::default()
    };
    let mut widening = Vec::new();
    if let Some(mode) = project.mode {
        if mode.leniency() <= base.mode.leniency() {
            out.mode = Some(mode);
        } else {
            widening.push(format!("sandbox.mode = \"{}\"", mode.id()));
        }
    }
    if let Some(network) = project.network {
        if network.leniency() <= base.network.leniency() {
            out.network = Some(network);
        } else {
            widening.push(format!("sandbox.network = \"{}\"", network.id()));
        }
    }
    if let Some(hosts) = &project.allow_hosts {
        let (kept, added): (Vec<HostPattern>, Vec<HostPattern>) = hosts
            .iter()
            .cloned()
            .partition(|h| base.network == Network::On || host_covered(&h.0, &base.allow_hosts));
        if base.network != Network::Off {
            out.allow_hosts = Some(kept);
        }
        for host in added {
            widening.push(format!("sandbox.allow_hosts: {}", host.0));
        }
    }
    if !project.allow_write.is_empty() {
        widening.push("sandbox.allow_write".to_string());
    }
    let limits = &project.limits;
    if let Some(n) = limits.processes {
        if n <= base.limits.processes {
            out.limits.processes = Some(n);
        } else {
            widening.push(format!("sandbox.limits.processes = {n}"));
        }
    }
    if let Some(size) = limits.file_size {
        if size.0 <= base.limits.file_size {
            out.limits.file_size = Some(size);
        } else {
            widening.push(format!("sandbox.limits.file_size = {}", size.0));
        }
    }
    if let Some(n) = limits.cpu_seconds {
        if n <= base.limits.cpu_seconds {
            out.limits.cpu_seconds = Some(n);
        } else {
            widening.push(format!("sandbox.limits.cpu_seconds = {n}"));
        }
    }
    match project.escape {
        Some(false) => out.escape = Some(false),
        Some(true) if !base.escape => widening.push("sandbox.escape = true".to_string()),
        _ => {}
    }
    if !project.by_provider.is_empty() {
        widening.push("sandbox.by_provider".to_string());
    }
    (out, widening)
}

/// Resolved limits of one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub processes: u64,
    pub file_size: u64,
    pub cpu_seconds: u64,
}

pub const DEFAULT_PROCESSES: u64 = 1024;
pub const DEFAULT_FILE_SIZE: u64 = 1 << 30;
pub const DEFAULT_CPU_SECONDS: u64 = 3600;

impl Default for Limits {
    fn default() -> Self {
        Self {
            processes: DEFAULT_PROCESSES,
            file_size: DEFAULT_FILE_SIZE,
            cpu_seconds: DEFAULT_CPU_SECONDS,
        }
    }
}

/// The settings a session's sandbox is built from: the user's `[sandbox]`
/// with a project's narrowing applied, and where the user's secrets are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub mode: SandboxMode,
    pub network: Network,
    /// With `network = "loopback"`: the hosts reached through the proxy
    /// (checked entries).
    pub allow_hosts: Vec<String>,
    /// Absolute paths.
    pub allow_write: Vec<PathBuf>,
    /// Absolute paths, beyond [`secrets`].
    pub deny_read: Vec<PathBuf>,
    pub limits: Limits,
    pub escape: bool,
}

impl Settings {
    /// `config` read against `home` (for `~`).
    pub fn from_config(config: &SandboxConfig, home: Option<&Path>) -> Self {
        let defaults = Limits::default();
        Self {
            mode: config.mode.unwrap_or_default(),
            network: config.network.unwrap_or_default(),
            allow_hosts: hosts_of(config.allow_hosts.as_deref().unwrap_or_default()),
            allow_write: config
                .allow_write
                .iter()
                .filter_map(|p| expand(p, home))
                .collect(),
            deny_read: config
                .deny_read
                .iter()
                .filter_map(|p| expand(p, home))
                .collect(),
            limits: Limits {
                processes: config.limits.processes.unwrap_or(defaults.processes),
                file_size: config.limits.file_size.map_or(defaults.file_size, |s| s.0),
                cpu_seconds: config.limits.cpu_seconds.unwrap_or(defaults.cpu_seconds),
            },
            escape: config.escape.unwrap_or(true),
        }
    }
}

impl Settings {
    /// These settings narrowed by `project` (a project's `[sandbox]`):
    /// whichever is stricter of each, and the project's `deny_read` added.
    /// Whatever `project` says, nothing gets looser.
    pub fn narrowed(mut self, project: &SandboxConfig, home: Option<&Path>) -> Settings {
        if let Some(mode) = project.mode
            && mode.leniency() < self.mode.leniency()
        {
            self.mode = mode;
        }
        if let Some(network) = project.network
            && network.leniency() < self.network.leniency()
        {
            self.network = network;
        }
        if let Some(hosts) = &project.allow_hosts {
            match self.network {
                // Everything was open: now just the project's hosts.
                Network::On => {
                    self.network = Network::Loopback;
                    self.allow_hosts = hosts_of(hosts);
                }
                Network::Loopback => {
                    let base = std::mem::take(&mut self.allow_hosts);
                    self.allow_hosts = hosts_of(hosts)
                        .into_iter()
                        .filter(|h| host_covered(h, &base))
                        .collect();
                }
                Network::Off => {}
            }
        }
        self.deny_read
            .extend(project.deny_read.iter().filter_map(|p| expand(p, home)));
        let limits = &project.limits;
        self.limits.processes = self
            .limits
            .processes
            .min(limits.processes.unwrap_or(u64::MAX));
        self.limits.file_size = self
            .limits
            .file_size
            .min(limits.file_size.map_or(u64::MAX, |s| s.0));
        self.limits.cpu_seconds = self
            .limits
            .cpu_seconds
            .min(limits.cpu_seconds.unwrap_or(u64::MAX));
        if project.escape == Some(false) {
            self.escape = false;
        }
        self
    }

    /// These settings with the keys `over` sets put over them (a server's
    /// own `sandbox` table): its mode and network, its limits, its lists
    /// added. It may widen: narrow the result by the project after.
    pub fn overlaid(mut self, over: &SandboxConfig, home: Option<&Path>) -> Settings {
        let own = Settings::from_config(over, home);
        self.mode = over.mode.unwrap_or(self.mode);
        self.network = over.network.unwrap_or(self.network);
        for host in own.allow_hosts {
            if !self.allow_hosts.contains(&host) {
                self.allow_hosts.push(host);
            }
        }
        self.allow_write.extend(own.allow_write);
        self.deny_read.extend(own.deny_read);
        let limits = &over.limits;
        self.limits.processes = limits.processes.unwrap_or(self.limits.processes);
        self.limits.file_size = limits.file_size.map_or(self.limits.file_size, |s| s.0);
        self.limits.cpu_seconds = limits.cpu_seconds.unwrap_or(self.limits.cpu_seconds);
        self.escape = over.escape.unwrap_or(self.escape);
        self
    }

    /// These settings for a session nobody watches (a chat channel, cron,
    /// heartbeat): never unconfined and never asking to leave, unless the
    /// user's `config` for it (the channel's `[sandbox]`) says so.
    pub fn unattended(mut self, config: &SandboxConfig) -> Settings {
        self.mode = config.mode.unwrap_or(match self.mode {
            SandboxMode::Off => SandboxMode::WorkspaceWrite,
            other => other,
        });
        self.network = config.network.unwrap_or(self.network);
        if let Some(hosts) = &config.allow_hosts {
            self.allow_hosts = hosts_of(hosts);
        }
        self.escape = config.escape.unwrap_or(false);
        self
    }
}

/// The entries of `list`, each once.
fn hosts_of(list: &[HostPattern]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for host in list {
        if !out.contains(&host.0) {
            out.push(host.0.clone());
        }
    }
    out
}

/// `~/x` under `home`; an absolute path as it is; anything else (a
/// relative path, `~` with no home known) is not a place and is dropped.
fn expand(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    let path = match text.strip_prefix("~") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            home?.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(text),
    };
    path.is_absolute().then_some(path)
}

/// Files and directories under the home directory that hold credentials:
/// never readable inside the sandbox.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".azure",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gcloud",
    ".config/gh/hosts.yml",
    ".config/hub",
    ".config/op",
    ".claude/.credentials.json",
    ".claude.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".password-store",
    ".local/share/keyrings",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
];

/// Sockets through which a process could act as the user outside the
/// sandbox (the Docker daemon, the system bus).
pub const MACHINE_SECRETS: &[&str] = &[
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/podman",
    "/run/dbus/system_bus_socket",
    "/run/screen",
];

/// Everything a sandboxed command may not read: [`HOME_SECRETS`] under
/// `home`, pincer's own directories (`pincer_dirs`: its config, state and
/// credentials), the user's runtime directory (`XDG_RUNTIME_DIR`: the
/// session bus, the ssh and gpg agents' sockets), the ssh agent's socket,
/// [`MACHINE_SECRETS`] and the user's `deny_read`.
pub fn secrets(
    home: Option<&Path>,
    pincer_dirs: &[PathBuf],
    deny_read: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(home) = home {
        out.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
    }
    out.extend(pincer_dirs.iter().cloned());
    for variable in ["XDG_RUNTIME_DIR", "SSH_AUTH_SOCK", "GPG_AGENT_INFO"] {
        if let Some(value) = std::env::var_os(variable) {
            let path = PathBuf::from(value);
            if path.is_absolute() {
                out.push(path);
            }
        }
    }
    out.extend(MACHINE_SECRETS.iter().map(PathBuf::from));
    out.extend(temp_sockets());
    out.extend(deny_read.iter().cloned());
    out
}

/// Names in the temp dir of sockets through which a process could act
/// as the user outside the sandbox: the X server (keystrokes into any
/// window), tmux and screen (keystrokes into a terminal), the ssh agent,
/// VS Code's command and git sockets. The temp dir is writable, so these
/// are covered one by one.
pub const TEMP_SOCKETS: &[&str] = &[
    ".X11-unix",
    ".ICE-unix",
    "tmux-",
    "screens",
    "ssh-",
    "vscode-ipc-",
    "vscode-git-",
    "vscode-ssh-auth-",
];

/// The entries of the temp dirs that [`TEMP_SOCKETS`] names.
fn temp_sockets() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in temp_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if TEMP_SOCKETS.iter().any(|prefix| name.starts_with(prefix)) {
                out.push(entry.path());
            }
        }
    }
    out
}

/// The working directory's own paths that stay read-only even where it is
/// writable: what git runs and obeys, and pincer's project settings.
pub const PROTECTED: &[&str] = &[".git/hooks", ".git/config", ".pincer"];

/// What one command is confined to. Every path is absolute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Where it may create, change and delete files.
    pub writable: Vec<PathBuf>,
    /// Paths inside `writable` that stay read-only (and cannot be renamed
    /// or removed).
    pub read_only: Vec<PathBuf>,
    /// Paths it may not read at all.
    pub deny_read: Vec<PathBuf>,
    pub network: Network,
    pub limits: Limits,
    /// With `network = "loopback"`: the network namespace the commands of
    /// this pincer share (one loopback for all, so a server one command
    /// started is reachable from the next), held by a process of its own;
    /// `None`: a namespace of the command's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_network: Option<SharedNetwork>,
    /// With `allow_hosts`: the hosts, and the port of the shared
    /// network's loopback where the proxy to them is reached; the command
    /// is told it in `HTTP_PROXY` and friends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<u16>,
}

/// A network namespace held for sandboxed commands to join: the holder's
/// pid, and the inodes of its user and network namespaces, which the
/// launcher checks before and after joining (a pid can be reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedNetwork {
    pub pid: i32,
    pub user: u64,
    pub net: u64,
}

/// The temp directories a command may write: the system's (`TMPDIR`) and
/// `/tmp`.
pub fn temp_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![std::env::temp_dir()];
    #[cfg(unix)]
    dirs.push(PathBuf::from("/tmp"));
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        if !out.contains(&dir) {
            out.push(dir);
        }
    }
    out
}

impl Policy {
    /// The policy of a command run in `cwd` under `settings`; `None` when
    /// the mode is `off`. `home` and `pincer_dirs` name the secrets.
    pub fn new(
        settings: &Settings,
        cwd: &Path,
        home: Option<&Path>,
        pincer_dirs: &[PathBuf],
    ) -> Option<Policy> {
        let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let cwd = canonical(cwd);
        let mut writable = Vec::new();
        let mut read_only = Vec::new();
        match settings.mode {
            SandboxMode::Off => return None,
            SandboxMode::ReadOnly => {}
            SandboxMode::WorkspaceWrite => {
                read_only.extend(PROTECTED.iter().map(|p| cwd.join(p)));
                writable.push(cwd.clone());
                writable.extend(settings.allow_write.iter().map(|p| canonical(p)));
            }
        }
        writable.extend(temp_dirs());
        let secrets = secrets(home, pincer_dirs, &settings.deny_read);
        let deny_read = carve(secrets.iter().map(|p| canonical(p)).collect(), &writable);
        Some(Policy {
            writable,
            read_only,
            deny_read,
            network: settings.network,
            limits: settings.limits,
            shared_network: None,
            allow_hosts: match settings.network {
                Network::Loopback => settings.allow_hosts.clone(),
                Network::Off | Network::On => Vec::new(),
            },
            proxy: None,
        })
    }
}

/// `deny` without what would hide a writable place: a denied directory
/// that holds one (pincer's config dir holding the agent's workspace, say)
/// is replaced by its entries other than the way to it, level by level,
/// so the place stays reachable and everything beside it stays denied.
/// A denied path inside a writable place stays denied.
pub fn carve(deny: Vec<PathBuf>, writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut work = deny;
    while let Some(path) = work.pop() {
        let holds: Vec<&PathBuf> = writable.iter().filter(|w| w.starts_with(&path)).collect();
        if holds.is_empty() {
            if !out.contains(&path) {
                out.push(path);
            }
            continue;
        }
        if holds.iter().any(|w| **w == path) {
            // The denied place is itself writable: the user's choice.
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            work.push(entry.path());
        }
    }
    out.sort();
    out
}

/// Why a command is worth a question even inside the sandbox, if it is:
/// what it does cannot be undone by putting files back, or leaves the
/// machine. `prefix` is one of a command line's scopes (`git push`);
/// network clients count only when the sandbox lets them out.
pub fn dangerous(prefix: &str, network: Network) -> Option<&'static str> {
    const HISTORY: &[&str] = &[
        "git push",
        "git reset",
        "git clean",
        "git rebase",
        "git branch",
        "git tag",
        "git stash",
        "git update-ref",
        "git reflog",
        "git gc",
        "git prune",
        "git filter-branch",
        "git filter-repo",
    ];
    const PUBLISH: &[&str] = &[
        "npm publish",
        "pnpm publish",
        "yarn publish",
        "cargo publish",
        "cargo yank",
        "gem push",
        "twine",
        "docker push",
        "gh",
        "glab",
    ];
    const NETWORK: &[&str] = &[
        "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "socat", "telnet", "ftp",
    ];
    // The program and subcommand, after any variable assignments.
    let words: Vec<&str> = prefix
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('='))
        .collect();
    let program = words.first().map(|w| w.rsplit('/').next().unwrap_or(w));
    let command = match (program, words.get(1)) {
        (Some(p), Some(sub)) => format!("{p} {sub}"),
        (Some(p), None) => p.to_string(),
        _ => return None,
    };
    let matches = |list: &[&str]| {
        list.iter()
            .any(|d| command == *d || program.is_some_and(|p| p == *d))
    };
    if matches(HISTORY) {
        return Some("it rewrites or removes git history, which undo cannot put back");
    }
    if matches(PUBLISH) {
        return Some("it publishes or changes something outside this machine");
    }
    if network == Network::On && matches(NETWORK) {
        return Some("it reaches the network, which the sandbox leaves open");
    }
    None
}

/// How a sandboxed command's failure reads when the sandbox caused it: the
/// words the kernel's errors print as.
pub fn looks_denied(output: &str) -> Option<&'static str> {
    const SIGNS: &[(&str, &str)] = &[
        (
            "Read-only file system",
            "a write outside the places the sandbox allows",
        ),
        (
            "Permission denied",
            "a file the sandbox does not let it read or write",
        ),
        (
            "Operation not permitted",
            "something the sandbox does not allow",
        ),
        (
            "Network is unreachable",
            "a connection the sandbox blocks (network is off)",
        ),
        (
            "does not let commands reach",
            "a host the sandbox's allow_hosts does not list",
        ),
        (
            "CONNECT tunnel failed, response 403",
            "a host the sandbox's allow_hosts does not list",
        ),
        (
            "Connection refused",
            "a connection the sandbox blocks (its network has only its own loopback)",
        ),
        (
            "Could not resolve host",
            "a name lookup the sandbox blocks (no network)",
        ),
        (
            "Temporary failure in name resolution",
            "a name lookup the sandbox blocks (no network)",
        ),
        (
            "Name or service not known",
            "a name lookup the sandbox blocks (no network)",
        ),
        (
            "Address family not supported",
            "a socket the sandbox does not allow",
        ),
        (
            "File size limit exceeded",
            "a file larger than the sandbox's file size limit",
        ),
        (
            "Resource temporarily unavailable",
            "more processes than the sandbox's limit",
        ),
        (
            "CPU time limit exceeded",
            "more CPU time than the sandbox's limit",
        ),
    ];
    SIGNS
        .iter()
        .find(|(sign, _)| output.contains(sign))
        .map(|(_, why)| *why)
}

/// The program that confines commands: the running `pincer` (set once by
/// its `main`). A process that is not `pincer` (a library's tests) has no
/// sandbox.
static LAUNCHER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Names the running program as the launcher of sandboxed commands.
pub fn set_launcher(path: PathBuf) {
    let _ = LAUNCHER.set(path);
}

/// Whether commands can be confined here, probed once per process by
/// confining a launcher that exits at once; `Err` says why not.
pub fn support() -> &'static Result<(), String> {
    static SUPPORT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    SUPPORT.get_or_init(probe)
}

#[cfg(target_os = "linux")]
fn probe() -> Result<(), String> {
    let Some(launcher) = LAUNCHER.get() else {
        return Err("only the pincer program can confine commands".to_string());
    };
    let policy = Policy {
        writable: temp_dirs(),
        read_only: Vec::new(),
        deny_read: Vec::new(),
        network: Network::Loopback,
        limits: Limits::default(),
        shared_network: None,
        allow_hosts: Vec::new(),
        proxy: None,
    };
    let output = launcher_for(launcher)
        .command()
        .args(["--probe", "--policy"])
        .arg(serde_json::to_string(&policy).unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", launcher.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    let why = said
        .lines()
        .find_map(|l| l.strip_prefix(SETUP_FAILED_PREFIX))
        .map_or_else(|| said.trim().to_string(), str::to_string);
    Err(why)
}

#[cfg(target_os = "macos")]
fn probe() -> Result<(), String> {
    if Path::new(seatbelt::SANDBOX_EXEC).is_file() {
        Ok(())
    } else {
        Err(format!("{} is missing", seatbelt::SANDBOX_EXEC))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn probe() -> Result<(), String> {
    Err("pincer has no sandbox for this operating system".to_string())
}

/// A command's confinement: the policy, and how to start a program in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confinement {
    pub policy: Policy,
    launcher: Launcher,
}

/// What confines a command: `pincer-sandbox` beside the running pincer
/// (small, so it starts fast), else `pincer sandbox exec`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Launcher {
    Small(PathBuf),
    Pincer(PathBuf),
}

impl Launcher {
    /// The launcher as a command, before its own arguments.
    fn command(&self) -> std::process::Command {
        match self {
            Launcher::Small(path) => std::process::Command::new(path),
            Launcher::Pincer(path) => {
                let mut command = std::process::Command::new(path);
                command.args(["sandbox", "exec"]);
                command
            }
        }
    }
}

/// The launcher beside `pincer` at `program`.
fn launcher_for(program: &Path) -> Launcher {
    let small = program.with_file_name(format!("pincer-sandbox{}", std::env::consts::EXE_SUFFIX));
    if small.is_file() {
        Launcher::Small(small)
    } else {
        Launcher::Pincer(program.to_path_buf())
    }
}

impl Confinement {
    /// The program and arguments that run `program` with `args` confined.
    pub fn command(&self, program: &str, args: &[String]) -> (String, Vec<String>) {
        #[cfg(target_os = "macos")]
        {
            let mut words: Vec<&str> = vec![program];
            words.extend(args.iter().map(String::as_str));
            let mut line = seatbelt::command(&self.policy, &words);
            let first = line.remove(0);
            (first, line)
        }
        #[cfg(not(target_os = "macos"))]
        {
            let (launcher, mut out) = match &self.launcher {
                Launcher::Small(path) => (path, Vec::new()),
                Launcher::Pincer(path) => (path, vec!["sandbox".to_string(), "exec".to_string()]),
            };
            out.extend([
                "--policy".to_string(),
                serde_json::to_string(&self.policy).unwrap_or_default(),
                "--".to_string(),
                program.to_string(),
            ]);
            out.extend(args.iter().cloned());
            (launcher.display().to_string(), out)
        }
    }

    /// One sentence for the model on what the sandbox allows.
    pub fn summary(&self) -> String {
        let places: Vec<String> = self
            .policy
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let network = match self.policy.network {
            Network::Off => "no network".to_string(),
            Network::Loopback if self.policy.allow_hosts.is_empty() => {
                "no network beyond its own loopback".to_string()
            }
            Network::Loopback => format!(
                "no network beyond its own loopback except {} through the proxy in HTTP_PROXY, HTTPS_PROXY and ALL_PROXY",
                self.policy.allow_hosts.join(", ")
            ),
            Network::On => "the network".to_string(),
        };
        format!(
            "Commands run in a sandbox: they may write only in {} (never .git/hooks, .git/config or .pincer/), cannot read the user's credentials, and have {network}.",
            places.join(", ")
        )
    }
}

/// A session's sandbox: the settings, the mode the session runs in now,
/// and whether a command it stopped may be run outside after asking.
#[derive(Debug)]
pub struct Sandbox {
    /// The user's settings, before a project narrowed them.
    base: Settings,
    /// The user's `[sandbox.by_provider]` tables, over `base` for the
    /// model the session runs.
    by_provider: SandboxConfig,
    /// The mode `PINCER_SANDBOX` chose for this process, over the
    /// config's.
    forced: Option<SandboxMode>,
    /// The project's `[sandbox]`, which narrows whatever else applies.
    project: Option<SandboxConfig>,
    state: parking_lot::Mutex<SandboxState>,
    home: Option<PathBuf>,
    pincer_dirs: Vec<PathBuf>,
}

#[derive(Debug)]
struct SandboxState {
    /// What applies: `base`, the model's tables, unattended if nobody
    /// watches, narrowed.
    settings: Settings,
    /// The mode the session runs in now (`/sandbox`).
    mode: SandboxMode,
    /// Whether the session chose `mode` (`/sandbox`): the model's tables
    /// no longer change it.
    chosen: bool,
    /// The model the session runs (provider, id).
    model: Option<(String, String)>,
    /// The user's table for the unattended session this is, if it is.
    unattended: Option<SandboxConfig>,
}

impl Sandbox {
    /// The sandbox of a session with the user's settings `base`, narrowed
    /// by `project`; `home` and `pincer_dirs` (pincer's config, state and
    /// data) name the secrets.
    pub fn new(
        base: Settings,
        project: Option<SandboxConfig>,
        home: Option<PathBuf>,
        pincer_dirs: Vec<PathBuf>,
    ) -> Self {
        let settings = match &project {
            Some(project) => base.clone().narrowed(project, home.as_deref()),
            None => base.clone(),
        };
        Self {
            base,
            by_provider: SandboxConfig::default(),
            forced: None,
            project,
            state: parking_lot::Mutex::new(SandboxState {
                mode: settings.mode,
                settings,
                chosen: false,
                model: None,
                unattended: None,
            }),
            home,
            pincer_dirs,
        }
    }

    /// With the user's `[sandbox.by_provider]` tables (`config`'s) for
    /// the model a session runs ([`Sandbox::set_model`]).
    pub fn with_models(mut self, config: &SandboxConfig) -> Self {
        self.by_provider = SandboxConfig {
            by_provider: config.by_provider.clone(),
            ..SandboxConfig::default()
        };
        self
    }

    /// With the mode `PINCER_SANDBOX` chose for this process.
    pub fn with_forced_mode(mut self, mode: Option<SandboxMode>) -> Self {
        self.forced = mode;
        {
            let mut state = self.state.lock();
            let settings = self.compute(&state);
            state.mode = settings.mode;
            state.settings = settings;
        }
        self
    }

    /// The settings that apply in `state`: the user's, the model's
    /// tables, `PINCER_SANDBOX`, unattended if nobody watches, and the
    /// project's narrowing last.
    fn compute(&self, state: &SandboxState) -> Settings {
        let home = self.home.as_deref();
        let mut settings = self.base.clone();
        if let Some((provider, id)) = &state.model {
            for table in self.by_provider.for_model(provider, id) {
                settings = settings.overlaid(table, home);
            }
        }
        if let Some(mode) = self.forced {
            settings.mode = mode;
        }
        if let Some(config) = &state.unattended {
            settings = settings.unattended(config);
        }
        if let Some(project) = &self.project {
            settings = settings.narrowed(project, home);
        }
        settings
    }

    /// The session runs `provider`'s model `id` now: its
    /// `[sandbox.by_provider]` tables apply (its mode too, unless the
    /// session chose one).
    pub fn set_model(&self, provider: &str, id: &str) {
        let mut state = self.state.lock();
        state.model = Some((provider.to_string(), id.to_string()));
        let settings = self.compute(&state);
        if !state.chosen
            || (state.unattended.is_some() && state.mode.leniency() > settings.mode.leniency())
        {
            state.mode = settings.mode;
        }
        state.settings = settings;
    }

    pub fn mode(&self) -> SandboxMode {
        self.state.lock().mode
    }

    pub fn set_mode(&self, mode: SandboxMode) {
        let mut state = self.state.lock();
        state.mode = mode;
        state.chosen = true;
    }

    /// Whether a command it stopped may run outside after the user agrees.
    pub fn may_escape(&self) -> bool {
        self.state.lock().settings.escape
    }

    /// The settings that apply now (the mode aside).
    pub fn settings(&self) -> Settings {
        self.state.lock().settings.clone()
    }

    /// Makes this the sandbox of a session nobody watches (a chat
    /// channel's, cron's, the heartbeat's), with `config` the user's
    /// `[sandbox]` for it: confined and never asking to leave unless
    /// `config` says so, still narrowed by the project. For good: a
    /// session a channel used once stays this strict.
    pub fn make_unattended(&self, config: &SandboxConfig) {
        let mut state = self.state.lock();
        state.unattended = Some(config.clone());
        let settings = self.compute(&state);
        if state.mode.leniency() > settings.mode.leniency() || !settings.escape {
            state.mode = settings.mode;
        }
        state.settings = settings;
    }

    /// How a command run in `cwd` now is confined: `Ok(None)` when the
    /// mode is off, `Err` (why) when it should be confined and cannot be.
    pub fn confinement(&self, cwd: &Path) -> Result<Option<Confinement>, String> {
        self.confinement_with(cwd, None)
    }

    /// [`Sandbox::confinement`] with `over` (the user's `sandbox` table
    /// of one MCP server) put over the session's settings; the project
    /// still narrows the result.
    pub fn confinement_with(
        &self,
        cwd: &Path,
        over: Option<&SandboxConfig>,
    ) -> Result<Option<Confinement>, String> {
        let mut settings = {
            let state = self.state.lock();
            Settings {
                mode: state.mode,
                ..state.settings.clone()
            }
        };
        if let Some(over) = over {
            settings = settings.overlaid(over, self.home.as_deref());
            if let Some(project) = &self.project {
                settings = settings.narrowed(project, self.home.as_deref());
            }
        }
        let Some(mut policy) = Policy::new(&settings, cwd, self.home.as_deref(), &self.pincer_dirs)
        else {
            return Ok(None);
        };
        support().clone()?;
        let launcher = launcher_for(&LAUNCHER.get().cloned().unwrap_or_default());
        if policy.network == Network::Loopback {
            let dir = self.pincer_dirs.last().map(PathBuf::as_path);
            let held = network::shared_network(&launcher, &policy.allow_hosts, dir)?;
            policy.shared_network = held.map(|h| h.network);
            policy.proxy = held.and_then(|h| h.proxy);
            if policy.proxy.is_none() {
                policy.allow_hosts.clear();
            }
        }
        Ok(Some(Confinement { policy, launcher }))
    }
}

/// The exit code of `pincer sandbox exec` when it could not confine the
/// command (it then never starts it).
pub const SETUP_FAILED: i32 = 125;
/// What `pincer sandbox exec` prints first when it could not confine the
/// command.
pub const SETUP_FAILED_PREFIX: &str = "pincer sandbox: ";

#[cfg(test)]
mod tests;
