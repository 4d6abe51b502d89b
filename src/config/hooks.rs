//! `[[hooks]]` in `config.toml`: which of the user's own commands run at
//! which points of a session, as the file writes them. The agent runs
//! them (`crate::agent::hooks`, which explains what a hook may answer).

use serde::{Deserialize, Serialize};

/// The points a hook can run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    BeforeToolCall,
    AfterToolCall,
    UserPromptSubmit,
    SessionStart,
    SessionEnd,
    BeforeCompaction,
    AfterCompaction,
    AgentEnd,
}

impl Event {
    pub fn id(self) -> &'static str {
        match self {
            Event::BeforeToolCall => "before_tool_call",
            Event::AfterToolCall => "after_tool_call",
            Event::UserPromptSubmit => "user_prompt_submit",
            Event::SessionStart => "session_start",
            Event::SessionEnd => "session_end",
            Event::BeforeCompaction => "before_compaction",
            Event::AfterCompaction => "after_compaction",
            Event::AgentEnd => "agent_end",
        }
    }
}

/// One `[[hooks]]` entry of `config.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    pub event: Event,
    /// Run with `sh -c` in the session's directory.
    pub command: String,
    /// For tool events: only tools whose name matches this glob.
    #[serde(default)]
    pub matcher: Option<String>,
    /// Seconds before the hook is killed (default 30).
    #[serde(default)]
    pub timeout: Option<f64>,
    /// Higher runs first (default 0; equal priorities keep config order).
    #[serde(default)]
    pub priority: i32,
    /// A failing hook refuses what it guards instead of being ignored.
    #[serde(default)]
    pub fail_closed: bool,
    /// Whether it runs in the session's sandbox (default true; `false`
    /// runs it as your own process, for a hook that must reach the
    /// desktop, the network or your credentials).
    #[serde(default)]
    pub sandbox: Option<bool>,
}
