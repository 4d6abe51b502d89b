//! Which tools the model may use: the tool policy pipeline.
//!
//! The model decides which tool to call; the policy decides which tools it
//! is offered at all. A tool must survive every step, in order: the tool
//! profile, the rules for the provider and for the exact model, the global
//! allow / deny lists, the agent's own rules, the session mode, and the
//! scope of the MCP server the tool comes from. Each step can only narrow
//! the set; deny beats allow; entries are case-insensitive and may use `*`
//! globs or name a `group:`; an empty allow list allows everything.
//!
//! A call to a tool that did not survive is refused with an error result
//! that names the step, so the model stops trying. `pincer tools` prints
//! the same explanation for people.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use globset::GlobMatcher;

use super::Mode;
use crate::tools::rules::{Profile, Rules, ToolsConfig};

/// The tools a `group:` entry stands for. Groups name tools pincer may not
/// have (yet); they then match nothing.
fn group(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "fs" => &["read", "write", "edit"],
        "runtime" => &["bash", "process"],
        "search" => &["grep", "find", "ls"],
        "mcp" => &["mcp__*"],
        "sessions" => &[
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
            "session_status",
            "task",
        ],
        "memory" => &["memory_search", "memory_get"],
        "web" => &["web_search", "web_fetch"],
        // Talking with the user while a run goes on.
        "interaction" => &["ask_user"],
        // Keeping a plan the editor shows: changes nothing on the machine.
        "planning" => &["todo"],
        _ => return None,
    })
}

/// A step of the pipeline, in the order they apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Profile(Profile),
    Provider(String),
    Model(String),
    Global,
    Agent(String),
    Mode(Mode),
    McpServer(String),
    /// A step from the project's `.pincer/config.toml`, which narrows the
    /// user's own.
    Project(Box<Step>),
    /// `pincer run --allowed-tools/--disallowed-tools`: one run's lists.
    CommandLine,
    /// The `tools` of a helper's definition (the `task` tool's agent).
    Helper(String),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Profile(p) => write!(f, "tool profile `{}`", p.id()),
            Step::Provider(p) => write!(f, "[tools.by_provider.\"{p}\"]"),
            Step::Model(m) => write!(f, "[tools.by_provider.\"{m}\"]"),
            Step::Global => write!(f, "[tools] allow/deny"),
            Step::Agent(a) => write!(f, "[agents.{a}.tools]"),
            Step::Mode(m) => write!(f, "the session's `{}` mode", m.id()),
            Step::McpServer(s) => write!(f, "the scope of MCP server `{s}`"),
            Step::Project(step) => write!(f, "{step} of the project's .pincer/config.toml"),
            Step::CommandLine => write!(f, "--allowed-tools/--disallowed-tools"),
            Step::Helper(name) => write!(f, "the tools of helper `{name}`"),
        }
    }
}

/// Why a tool is not offered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    pub step: Step,
    /// The deny entry that matched, or `None` when the tool is missing from
    /// a non-empty allow list.
    pub denied_by: Option<String>,
}

impl fmt::Display for Removal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.denied_by {
            Some(entry) => write!(f, "denied by `{entry}` in {}", self.step),
            None => write!(f, "not allowed by {}", self.step),
        }
    }
}

/// A compiled allow / deny pair.
#[derive(Clone, Debug)]
struct Filter {
    step: Step,
    allow: Vec<(String, Arc<GlobMatcher>)>,
    deny: Vec<(String, Arc<GlobMatcher>)>,
}

impl Filter {
    fn new(step: Step, allow: &[String], deny: &[String]) -> Result<Self, PolicyError> {
        Ok(Self {
            step,
            allow: compile(allow)?,
            deny: compile(deny)?,
        })
    }

    fn check(&self, tool: &str) -> Result<(), Removal> {
        if let Some((entry, _)) = self.deny.iter().find(|(_, m)| m.is_match(tool)) {
            return Err(Removal {
                step: self.step.clone(),
                denied_by: Some(entry.clone()),
            });
        }
        if self.allow.is_empty() || self.allow.iter().any(|(_, m)| m.is_match(tool)) {
            Ok(())
        } else {
            Err(Removal {
                step: self.step.clone(),
                denied_by: None,
            })
        }
    }
}

/// Each entry with the globs it stands for (a group expands to several).
fn compile(entries: &[String]) -> Result<Vec<(String, Arc<GlobMatcher>)>, PolicyError> {
    let mut out = Vec::new();
    for entry in entries {
        let trimmed = entry.trim();
        let patterns: Vec<&str> = match trimmed
            .to_ascii_lowercase()
            .strip_prefix("group:")
            .map(str::to_string)
        {
            Some(name) => group(&name)
                .ok_or_else(|| PolicyError::UnknownGroup(trimmed.to_string()))?
                .to_vec(),
            None => vec![trimmed],
        };
        for pattern in patterns {
            let matcher =
                crate::tools::globs::matcher(pattern).map_err(|e| PolicyError::BadPattern {
                    entry: trimmed.to_string(),
                    message: e.kind().to_string(),
                })?;
            out.push((entry.clone(), matcher));
        }
    }
    Ok(out)
}

/// A policy that cannot be compiled: the config names something unknown.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error(
        "unknown tool group `{0}` (groups: group:fs, group:runtime, group:search, group:mcp, group:sessions, group:memory, group:web)"
    )]
    UnknownGroup(String),
    #[error("bad tool pattern `{entry}`: {message}")]
    BadPattern { entry: String, message: String },
}

/// The compiled pipeline for one model and agent; the mode step is applied
/// per turn, since the user can switch modes mid-session.
#[derive(Clone, Debug)]
pub struct ToolPolicy {
    steps: Vec<Filter>,
    mcp: BTreeMap<String, Filter>,
}

impl Default for ToolPolicy {
    /// The default profile and nothing else.
    fn default() -> Self {
        Self::new(&ToolsConfig::default(), None, "", "", &BTreeMap::new()).unwrap_or_else(|_| {
            Self {
                steps: Vec::new(),
                mcp: BTreeMap::new(),
            }
        })
    }
}

impl ToolPolicy {
    /// The pipeline for `provider/model` under `agent`'s rules. `mcp` holds
    /// each MCP server's own scope (tools named `mcp__<server>__<tool>`).
    pub fn new(
        config: &ToolsConfig,
        agent: Option<(&str, &Rules)>,
        provider: &str,
        model: &str,
        mcp: &BTreeMap<String, Rules>,
    ) -> Result<Self, PolicyError> {
        Self::layered(config, None, agent, provider, model, mcp)
    }

    /// As [`Self::new`], with a project's `[tools]` narrowing the user's.
    pub fn layered(
        config: &ToolsConfig,
        project: Option<&ToolsConfig>,
        agent: Option<(&str, &Rules)>,
        provider: &str,
        model: &str,
        mcp: &BTreeMap<String, Rules>,
    ) -> Result<Self, PolicyError> {
        let mut steps = layer(config, provider, model, true)?;
        if let Some(project) = project {
            for mut filter in layer(project, provider, model, false)? {
                filter.step = Step::Project(Box::new(filter.step));
                steps.push(filter);
            }
        }
        if let Some((id, rules)) = agent
            && !rules.is_empty()
        {
            steps.push(Filter::new(
                Step::Agent(id.to_string()),
                &rules.allow,
                &rules.deny,
            )?);
        }
        let mcp = mcp
            .iter()
            .map(|(server, rules)| {
                Filter::new(Step::McpServer(server.clone()), &rules.allow, &rules.deny)
                    .map(|f| (server.clone(), f))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { steps, mcp })
    }

    /// The policy with one more step after the others: lists given for a
    /// single run on the command line, which (like every step) can only
    /// narrow what the config allows.
    pub fn narrowed(mut self, allow: &[String], deny: &[String]) -> Result<Self, PolicyError> {
        if !(allow.is_empty() && deny.is_empty()) {
            self.steps
                .push(Filter::new(Step::CommandLine, allow, deny)?);
        }
        Ok(self)
    }

    /// Whether `tool` is offered in `mode`, and if not, which step took it
    /// away. `mutating` says whether the tool changes anything (the mode
    /// step removes those in plan mode).
    /// This policy with a helper's `tools` list after the other steps:
    /// like every step, it can only take tools away.
    pub fn for_helper(&self, name: &str, allow: &[String]) -> Result<Self, PolicyError> {
        let mut narrowed = self.clone();
        narrowed
            .steps
            .push(Filter::new(Step::Helper(name.to_string()), allow, &[])?);
        Ok(narrowed)
    }

    pub fn check(&self, tool: &str, mutating: bool, mode: Mode) -> Result<(), Removal> {
        for step in &self.steps {
            step.check(tool)?;
        }
        if mode == Mode::Plan && mutating {
            return Err(Removal {
                step: Step::Mode(mode),
                denied_by: None,
            });
        }
        if let Some(rest) = tool.strip_prefix("mcp__")
            && let Some((server, name)) = rest.split_once("__")
            && let Some(scope) = self.mcp.get(server)
        {
            // The server's scope names its tools without the prefix.
            scope.check(name)?;
        }
        Ok(())
    }
}

/// The profile, provider, model and global steps of one config file. The
/// user's profile defaults to `coding`; a project without a profile adds
/// none.
fn layer(
    config: &ToolsConfig,
    provider: &str,
    model: &str,
    user: bool,
) -> Result<Vec<Filter>, PolicyError> {
    let mut steps = Vec::new();
    let profile = if user {
        Some(config.profile.unwrap_or_default())
    } else {
        config.profile
    };
    if let Some(profile) = profile {
        let allow: Vec<String> = profile.allow().iter().map(|s| s.to_string()).collect();
        steps.push(Filter::new(Step::Profile(profile), &allow, &[])?);
    }
    let lower = |s: &str| s.to_ascii_lowercase();
    let full_id = format!("{provider}/{model}");
    let mut scoped = Vec::new();
    for (key, rules) in &config.by_provider {
        let step = if lower(key) == lower(provider) {
            Step::Provider(key.clone())
        } else if lower(key) == lower(&full_id) {
            Step::Model(key.clone())
        } else {
            continue;
        };
        scoped.push(Filter::new(step, &rules.allow, &rules.deny)?);
    }
    // Provider rules before model rules, whatever order the map has.
    scoped.sort_by_key(|f| matches!(f.step, Step::Model(_)));
    steps.extend(scoped);
    if user || !(config.allow.is_empty() && config.deny.is_empty()) {
        steps.push(Filter::new(Step::Global, &config.allow, &config.deny)?);
    }
    Ok(steps)
}

#[cfg(test)]
mod tests;
