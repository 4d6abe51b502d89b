//! Whether a tool call may run without asking: the session mode, the
//! answers the user chose to have remembered ("always allow `cargo test`"),
//! and whether the call reaches outside the workspace.
//!
//! Remembered answers are kept per session and persisted per project in
//! the user's state (`<config dir>/permissions/<project hash>.toml`), so
//! they survive a restart. They are never read from the working tree: a
//! repository must not be able to pre-approve anything. A rule is a tool
//! name, optionally with a command prefix (`bash:cargo test`); a shell
//! command made of several commands is allowed only when every one of them
//! is.
//!
//! Commands run in the session's sandbox (`crate::tools::sandbox`) where
//! it has one. There a command that would ask runs without asking unless
//! it is dangerous by itself ([`crate::tools::sandbox::dangerous`]): the
//! sandbox, not the question, keeps it to the project. A command the
//! sandbox stopped may be run outside it after its own question, whose
//! "always" answers are remembered apart (`outside` in the file): an
//! answer given inside the sandbox never lets a command out of it.
//!
//! Some paths are sensitive: pincer's own `.pincer/` files, `.git/` (hooks
//! and config that git runs and obeys), the user's shell start-up files and
//! `~/.ssh`, and pincer's own state. A change to one always asks, in every
//! mode but `bypass` and whatever was remembered, because writing there
//! turns "may edit files" into "may run anything later".

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::config::Mode;
use crate::tools::sandbox::{Confinement, Sandbox};
use crate::tools::{CallInfo, Tool, ToolKind, is_inside};

/// What to do with a call before running it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Ask the user; the text says why.
    Ask(String),
    /// Refuse without asking; the text says why.
    Reject(String),
}

/// The user's answer to a permission request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
    /// The request was withdrawn: the turn is being cancelled.
    Cancelled,
}

/// A remembered answer: a tool, optionally narrowed to a command prefix.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    pub tool: String,
    pub prefix: Option<String>,
}

impl Rule {
    fn parse(text: &str) -> Rule {
        match text.split_once(':') {
            Some((tool, prefix)) => Rule {
                tool: tool.trim().to_lowercase(),
                prefix: Some(normalize_words(prefix)),
            },
            None => Rule {
                tool: text.trim().to_lowercase(),
                prefix: None,
            },
        }
    }

    fn to_text(&self) -> String {
        match &self.prefix {
            Some(prefix) => format!("{}:{prefix}", self.tool),
            None => self.tool.clone(),
        }
    }

    /// Whether this rule covers `scope` (a command) of `tool`.
    fn covers(&self, tool: &str, scope: Option<&str>) -> bool {
        if !self.tool.eq_ignore_ascii_case(tool) {
            return false;
        }
        match (&self.prefix, scope) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(prefix), Some(scope)) => {
                let mut words = scope.split_whitespace();
                prefix.split_whitespace().all(|p| words.next() == Some(p))
            }
        }
    }
}

fn normalize_words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The file that keeps a project's remembered answers.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct RulesFile {
    /// The project these answers are for.
    project: Option<String>,
    allow: Vec<String>,
    reject: Vec<String>,
    /// Commands allowed to run outside the sandbox when it stops them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    outside: Vec<String>,
}

/// The paths whose change always asks, and why.
#[derive(Clone, Debug, Default)]
pub struct Sensitive {
    home: Option<PathBuf>,
    config_dir: Option<PathBuf>,
}

/// Shell start-up files in the home directory: the shell runs them.
const SHELL_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".cshrc",
    ".tcshrc",
    ".inputrc",
    ".config/fish",
    ".config/environment.d",
];

impl Sensitive {
    /// The user's home (for shell and ssh files) and pincer's config dir.
    pub fn new(home: Option<PathBuf>, config_dir: Option<PathBuf>) -> Self {
        Self { home, config_dir }
    }

    /// Why changing `path` always asks, if it does. Both the path as given
    /// and where its symlinks lead count.
    pub fn why(&self, path: &Path) -> Option<String> {
        let resolved = resolve(path);
        [path, resolved.as_path()]
            .into_iter()
            .find_map(|p| self.why_lexical(p))
    }

    fn why_lexical(&self, path: &Path) -> Option<String> {
        let shown = path.display();
        for component in path.components() {
            match component.as_os_str().to_str() {
                Some(".git") => {
                    return Some(format!(
                        "{shown} is inside .git, whose hooks and config git runs and obeys"
                    ));
                }
                Some(".pincer") => {
                    return Some(format!(
                        "{shown} is inside .pincer, which holds pincer's own settings for this project"
                    ));
                }
                _ => {}
            }
        }
        if let Some(rest) = self.home.as_ref().and_then(|h| path.strip_prefix(h).ok()) {
            if rest.starts_with(".ssh") {
                return Some(format!("{shown} is in ~/.ssh, your ssh keys and settings"));
            }
            if SHELL_FILES.iter().any(|f| rest.starts_with(f)) {
                return Some(format!("{shown} is a start-up file your shell runs"));
            }
        }
        let dir = self.config_dir.as_ref()?;
        path.starts_with(dir)
            .then(|| format!("{shown} is in pincer's own configuration and credentials directory"))
    }
}

/// `path` with its symlinks followed, as far as it exists.
fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    // A dangling link: where it points.
    if let Ok(target) = std::fs::read_link(path) {
        let base = path.parent().unwrap_or(Path::new("/"));
        return base.join(target);
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => resolve(parent).join(name),
        _ => path.to_path_buf(),
    }
}

/// Where a project's remembered answers live: in the user's config dir,
/// named after a hash of the project's canonical root.
pub fn state_file(config_dir: &Path, project_root: &Path) -> PathBuf {
    use sha2::Digest;
    let root = std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_path_buf());
    let digest = sha2::Sha256::digest(root.display().to_string().as_bytes());
    let name: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    config_dir.join("permissions").join(format!("{name}.toml"))
}

#[derive(Debug, Default)]
struct State {
    mode: Mode,
    allow: BTreeSet<Rule>,
    reject: BTreeSet<Rule>,
    outside: BTreeSet<Rule>,
    /// Whether the user was told the sandbox is not available here.
    unavailable_said: bool,
}

/// Where a call's commands run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sandboxing {
    /// Unconfined: the tool runs no commands, the session has no sandbox,
    /// or its mode is off.
    None,
    /// In this confinement.
    Confined(Confinement),
    /// It should be confined and cannot be here (why): the call asks as it
    /// would without a sandbox.
    Unavailable(String),
}

/// A session's permission state: its mode and remembered answers.
#[derive(Debug)]
pub struct Permissions {
    state: Mutex<State>,
    /// Directories calls may touch without asking.
    roots: Vec<PathBuf>,
    /// Where remembered answers are persisted, if anywhere.
    file: Option<PathBuf>,
    /// Paths whose change always asks.
    sensitive: Sensitive,
    /// The project the answers belong to, recorded in the file.
    project: Option<String>,
    /// The session's sandbox, if it has one.
    sandbox: Option<std::sync::Arc<Sandbox>>,
}

impl Permissions {
    /// Loads the project's remembered answers from `file` (in the user's
    /// state, see [`state_file`]). A broken file is reported and ignored:
    /// it must not stop the session.
    pub fn new(mode: Mode, roots: Vec<PathBuf>, file: Option<PathBuf>) -> Self {
        let mut state = State {
            mode,
            ..State::default()
        };
        if let Some(path) = &file {
            match std::fs::read_to_string(path) {
                Ok(text) => match toml::from_str::<RulesFile>(&text) {
                    Ok(rules) => {
                        state.allow = rules.allow.iter().map(|r| Rule::parse(r)).collect();
                        state.reject = rules.reject.iter().map(|r| Rule::parse(r)).collect();
                        state.outside = rules.outside.iter().map(|r| Rule::parse(r)).collect();
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable permissions file")
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read permissions file")
                }
            }
        }
        Self {
            state: Mutex::new(state),
            project: roots.first().map(|r| r.display().to_string()),
            roots,
            file,
            sensitive: Sensitive::default(),
            sandbox: None,
        }
    }

    /// With a sandbox for the session's commands.
    pub fn with_sandbox(mut self, sandbox: std::sync::Arc<Sandbox>) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    pub fn sandbox(&self) -> Option<&std::sync::Arc<Sandbox>> {
        self.sandbox.as_ref()
    }

    /// Where a call of `tool` in `cwd` runs its commands.
    pub fn sandboxing(&self, tool: &dyn Tool, cwd: &Path) -> Sandboxing {
        if !tool.runs_commands() {
            return Sandboxing::None;
        }
        let Some(sandbox) = &self.sandbox else {
            return Sandboxing::None;
        };
        match sandbox.confinement(cwd) {
            Ok(None) => Sandboxing::None,
            Ok(Some(confinement)) => Sandboxing::Confined(confinement),
            Err(why) => Sandboxing::Unavailable(why),
        }
    }

    /// Whether the user still has to be told that the sandbox is not
    /// available (true once: the first time it is asked).
    pub fn tell_unavailable(&self) -> bool {
        let mut state = self.lock();
        !std::mem::replace(&mut state.unavailable_said, true)
    }

    /// Whether the user allowed, for good, every command of this call to
    /// run outside the sandbox.
    pub fn allowed_outside(&self, tool: &dyn Tool, args: &serde_json::Value) -> bool {
        let scopes = tool.permission_scopes(args);
        let state = self.lock();
        !scopes.is_empty()
            && scopes
                .iter()
                .all(|s| state.outside.iter().any(|r| r.covers(tool.name(), Some(s))))
    }

    /// With the user's sensitive paths known.
    pub fn with_sensitive(mut self, sensitive: Sensitive) -> Self {
        self.sensitive = sensitive;
        self
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    pub fn mode(&self) -> Mode {
        self.lock().mode
    }

    pub fn set_mode(&self, mode: Mode) {
        self.lock().mode = mode;
    }

    fn outside(&self, info: &CallInfo) -> Vec<PathBuf> {
        info.locations
            .iter()
            .filter(|l| !self.roots.iter().any(|root| is_inside(root, &l.path)))
            .map(|l| l.path.clone())
            .collect()
    }

    /// Decides about one call; `confined` is the sandbox its commands will
    /// run in, if any.
    pub fn decide(
        &self,
        tool: &dyn Tool,
        info: &CallInfo,
        args: &serde_json::Value,
        confined: Option<&Confinement>,
    ) -> Decision {
        let scopes = tool.permission_scopes(args);
        let state = self.lock();
        let name = tool.name();
        let matches = |rules: &BTreeSet<Rule>, scope: Option<&str>| {
            rules.iter().any(|r| r.covers(name, scope))
        };
        let rejected = if scopes.is_empty() {
            matches(&state.reject, None)
        } else {
            scopes.iter().any(|s| matches(&state.reject, Some(s)))
        };
        if rejected {
            return Decision::Reject(format!(
                "the user chose to always reject {}",
                describe_scopes(name, &scopes)
            ));
        }
        if state.mode == Mode::Plan && tool.mutating() {
            return Decision::Reject("the session is in plan mode, which is read-only".to_string());
        }
        if state.mode == Mode::Bypass {
            return Decision::Allow;
        }
        // In the sandbox, the sandbox decides where a command may write
        // and what it may reach; only what it cannot stop is asked about.
        if let Some(confined) = confined
            && tool.runs_commands()
        {
            let dangerous = scopes.iter().find_map(|s| {
                crate::tools::sandbox::dangerous(s, confined.policy.network)
                    .map(|why| (s.clone(), why))
            });
            let Some((scope, why)) = dangerous else {
                return Decision::Allow;
            };
            if matches(&state.allow, Some(&scope)) {
                return Decision::Allow;
            }
            return Decision::Ask(format!("`{scope}` runs in the sandbox, but {why}"));
        }
        if tool.mutating()
            && let Some(why) = info
                .locations
                .iter()
                .find_map(|l| self.sensitive.why(&l.path))
        {
            return Decision::Ask(format!("{why}; pincer always asks before changing it"));
        }
        let outside = self.outside(info);
        if !tool.mutating() && outside.is_empty() {
            return Decision::Allow;
        }
        let edit = matches!(
            info.kind,
            ToolKind::Edit | ToolKind::Delete | ToolKind::Move
        );
        if state.mode == Mode::AcceptEdits && edit && outside.is_empty() {
            return Decision::Allow;
        }
        let allowed = if scopes.is_empty() {
            matches(&state.allow, None)
        } else {
            scopes.iter().all(|s| matches(&state.allow, Some(s)))
        };
        // A remembered answer covers the tool inside the project; a change
        // outside it (a write, a redirection's target) asks every time.
        if allowed && (outside.is_empty() || !tool.mutating()) {
            return Decision::Allow;
        }
        Decision::Ask(match outside.first() {
            Some(path) => format!("{} is outside the project", path.display()),
            None => info.title.clone(),
        })
    }

    /// Remembers an "always" answer for a call and persists it.
    pub fn remember(&self, allow: bool, tool: &dyn Tool, args: &serde_json::Value) {
        self.remember_in(if allow { Kind::Allow } else { Kind::Reject }, tool, args);
    }

    /// Remembers that the commands of a call may always run outside the
    /// sandbox when it stops them.
    pub fn remember_outside(&self, tool: &dyn Tool, args: &serde_json::Value) {
        self.remember_in(Kind::Outside, tool, args);
    }

    fn remember_in(&self, kind: Kind, tool: &dyn Tool, args: &serde_json::Value) {
        let scopes = tool.permission_scopes(args);
        let rules: Vec<Rule> = if scopes.is_empty() {
            vec![Rule {
                tool: tool.name().to_string(),
                prefix: None,
            }]
        } else {
            scopes
                .iter()
                .map(|s| Rule {
                    tool: tool.name().to_string(),
                    prefix: Some(normalize_words(s)),
                })
                .collect()
        };
        let file = {
            let mut state = self.lock();
            let set = match kind {
                Kind::Allow => &mut state.allow,
                Kind::Reject => &mut state.reject,
                Kind::Outside => &mut state.outside,
            };
            set.extend(rules);
            RulesFile {
                project: self.project.clone(),
                allow: state.allow.iter().map(Rule::to_text).collect(),
                reject: state.reject.iter().map(Rule::to_text).collect(),
                outside: state.outside.iter().map(Rule::to_text).collect(),
            }
        };
        if let Some(path) = &self.file
            && let Err(e) = write_rules(path, &file)
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot save permissions");
        }
    }
}

/// Which answers a remembered rule joins.
#[derive(Clone, Copy)]
enum Kind {
    Allow,
    Reject,
    Outside,
}

fn describe_scopes(tool: &str, scopes: &[String]) -> String {
    if scopes.is_empty() {
        tool.to_string()
    } else {
        format!("`{}`", scopes.join("`, `"))
    }
}

fn write_rules(path: &Path, rules: &RulesFile) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::config::trust::create_private_dir(dir)?;
    }
    let text = toml::to_string(rules).map_err(std::io::Error::other)?;
    let header = "# Answers pincer remembers for this project (\"always allow\" / \"always reject\").\n# Entries are a tool name, or tool:command-prefix for shell commands. `allow` applies\n# inside the sandbox (or without one); `outside` lets a command the sandbox stopped\n# run outside it.\n";
    crate::config::trust::write_private(path, format!("{header}{text}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_whole_words() {
        let rule = Rule::parse("bash:cargo  test");
        assert!(rule.covers("bash", Some("cargo test --all")));
        assert!(rule.covers("bash", Some("cargo test")));
        assert!(!rule.covers("bash", Some("cargo testify")));
        assert!(!rule.covers("bash", Some("cargo build")));
        assert!(!rule.covers("bash", None));
        assert!(!rule.covers("write", Some("cargo test")));
        assert!(Rule::parse("edit").covers("edit", None));
        assert_eq!(rule.to_text(), "bash:cargo test");
    }

    #[test]
    fn modes_round_trip_their_ids() {
        for mode in Mode::ALL {
            assert_eq!(Mode::parse(mode.id()), Some(mode));
        }
        assert_eq!(Mode::parse("yolo"), None);
    }
}
