//! Which tools a config file lets the model see, as it writes them: a
//! tool profile and allow / deny lists (`[tools]`, `[agents.<id>.tools]`,
//! an MCP server's `allow` / `deny`).
//!
//! These are plain data beside the tools they name, so that the config
//! file and the MCP client can state them without knowing the agent; the
//! agent's tool policy (`crate::agent::policy`) compiles and applies them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A named starting set of tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Look, don't touch: `read` and the search tools.
    Minimal,
    /// Everything a coding agent needs (the default).
    #[default]
    Coding,
    /// Talking to people and sessions: no files, no commands.
    Messaging,
    /// No restriction.
    Full,
}

impl Profile {
    /// The allow list the profile starts from (empty: everything).
    pub fn allow(self) -> &'static [&'static str] {
        match self {
            Profile::Minimal => &["read", "group:search"],
            Profile::Coding => &[
                "group:fs",
                "group:runtime",
                "group:search",
                "group:mcp",
                "group:sessions",
                "group:memory",
                "group:interaction",
                "group:planning",
            ],
            Profile::Messaging => &[
                "group:sessions",
                "group:memory",
                "group:interaction",
                "message",
            ],
            Profile::Full => &[],
        }
    }

    pub fn id(self) -> &'static str {
        match self {
            Profile::Minimal => "minimal",
            Profile::Coding => "coding",
            Profile::Messaging => "messaging",
            Profile::Full => "full",
        }
    }
}

/// Allow and deny lists as written in the config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rules {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }
}

/// `[tools]` in `config.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    pub profile: Option<Profile>,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// Rules per provider (`openai`) or per model (`openai/gpt-5`).
    pub by_provider: BTreeMap<String, Rules>,
}
