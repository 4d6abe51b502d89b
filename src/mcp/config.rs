//! The `[mcp]` section of `config.toml`: pincer's own servers, timeouts,
//! and each server's allow / deny lists (the tool policy's MCP scope).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, Origin, ServerSpec, Transport};

/// `[mcp]` in `config.toml`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Seconds a server has to start and list its tools (default 10).
    pub startup_timeout: Option<u64>,
    /// Seconds one call may take, for servers without their own `timeout`
    /// (default 60).
    pub timeout: Option<u64>,
    /// `[mcp.servers.<name>]`: servers pincer starts for every session.
    /// The editor's servers may be named here too, for their timeout and
    /// allow / deny lists.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One `[mcp.servers.<name>]` table: `command` (stdio) or `url` (HTTP).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Working directory of a stdio server (default: the session's).
    pub cwd: Option<PathBuf>,
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// Seconds one call may take.
    pub timeout: Option<u64>,
    /// The server's tools the model may use (names without the
    /// `mcp__<server>__` prefix; globs allowed). Empty: all.
    pub allow: Vec<String>,
    /// The server's tools the model may not use.
    pub deny: Vec<String>,
    /// `false` turns the server off (a project may turn off a user's).
    pub enabled: Option<bool>,
}

impl McpConfig {
    pub fn startup_timeout(&self) -> Duration {
        self.startup_timeout
            .map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_secs)
    }

    /// The call timeout of server `name`.
    pub fn call_timeout(&self, name: &str) -> Duration {
        self.servers
            .get(name)
            .and_then(|s| s.timeout)
            .or(self.timeout)
            .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_secs)
    }

    /// Each configured server's allow / deny lists, by tool-name prefix
    /// (the policy's MCP scope step).
    pub fn scopes(
        &self,
        project: &BTreeMap<String, ServerConfig>,
    ) -> BTreeMap<String, crate::tools::rules::Rules> {
        project
            .iter()
            .chain(self.servers.iter())
            .filter(|(_, s)| !(s.allow.is_empty() && s.deny.is_empty()))
            .map(|(name, s)| {
                (
                    tool_prefix_name(name),
                    crate::tools::rules::Rules {
                        allow: s.allow.clone(),
                        deny: s.deny.clone(),
                    },
                )
            })
            .collect()
    }

    /// The enabled configured servers, ready to start in `cwd`. A table
    /// with neither `command` nor `url` (one that only sets a timeout or
    /// lists for an editor's server) starts nothing.
    pub fn specs(&self, cwd: &std::path::Path) -> Vec<ServerSpec> {
        self.specs_of(&self.servers, cwd, Origin::Config)
    }

    /// A trusted project's own servers (see `Config::project_mcp`).
    pub fn project_specs(
        &self,
        servers: &BTreeMap<String, ServerConfig>,
        cwd: &std::path::Path,
    ) -> Vec<ServerSpec> {
        self.specs_of(servers, cwd, Origin::Project)
    }

    fn specs_of(
        &self,
        servers: &BTreeMap<String, ServerConfig>,
        cwd: &std::path::Path,
        origin: Origin,
    ) -> Vec<ServerSpec> {
        servers
            .iter()
            .filter(|(_, s)| s.enabled != Some(false))
            .filter_map(|(name, s)| {
                let transport = match (&s.command, &s.url) {
                    (Some(command), _) => Transport::Stdio {
                        command: PathBuf::from(command),
                        args: s.args.clone(),
                        env: s.env.clone().into_iter().collect(),
                        cwd: s.cwd.clone().unwrap_or_else(|| cwd.to_path_buf()),
                    },
                    (None, Some(url)) => Transport::Http {
                        url: url.clone(),
                        headers: s.headers.clone().into_iter().collect(),
                    },
                    (None, None) => return None,
                };
                Some(ServerSpec {
                    name: name.clone(),
                    transport,
                    call_timeout: s
                        .timeout
                        .or(self.timeout)
                        .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_secs),
                    origin,
                })
            })
            .collect()
    }

    /// Whether the config turns server `name` off.
    pub fn disabled(&self, name: &str) -> bool {
        self.servers.get(name).and_then(|s| s.enabled) == Some(false)
    }
}

/// The part of a server's name that goes into its tools' names: what
/// providers accept in a tool name (letters, digits, `_`, `-`).
pub fn tool_prefix_name(server: &str) -> String {
    let cleaned: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // `__` separates server and tool; keep it out of the server's part.
    let mut out = String::with_capacity(cleaned.len());
    for c in cleaned.chars() {
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse(text: &str) -> McpConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn servers_become_specs_with_their_timeouts_and_lists_become_scopes() {
        let user = parse(
            "timeout = 30\n[servers.a]\ncommand = \"a-server\"\nargs = [\"--x\"]\ndeny = [\"rm\"]\ntimeout = 5\n[servers.b]\nurl = \"http://b\"\nenabled = false\n[servers.ed]\ndeny = [\"x\"]\n",
        );
        assert_eq!(user.call_timeout("a"), Duration::from_secs(5));
        assert_eq!(user.call_timeout("c"), Duration::from_secs(30));
        assert!(user.disabled("b"));
        let specs = user.specs(std::path::Path::new("/project"));
        assert_eq!(
            specs,
            vec![ServerSpec {
                name: "a".into(),
                transport: Transport::Stdio {
                    command: PathBuf::from("a-server"),
                    args: vec!["--x".into()],
                    env: Vec::new(),
                    cwd: PathBuf::from("/project"),
                },
                call_timeout: Duration::from_secs(5),
                origin: Origin::Config,
            }]
        );
        let project = parse("[servers.p]\ncommand = \"p-server\"\ndeny = [\"y\"]\n").servers;
        let specs = user.project_specs(&project, std::path::Path::new("/project"));
        assert_eq!(
            (
                specs[0].name.as_str(),
                specs[0].origin,
                specs[0].call_timeout
            ),
            ("p", Origin::Project, Duration::from_secs(30))
        );
        assert_eq!(
            user.scopes(&project).keys().collect::<Vec<_>>(),
            vec!["a", "ed", "p"],
            "only servers with lists have a scope"
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<McpConfig>("[servers.a]\ncomand = \"x\"\n").is_err());
    }

    #[test]
    fn server_names_become_valid_tool_name_parts() {
        assert_eq!(tool_prefix_name("github"), "github");
        assert_eq!(tool_prefix_name("My Server.v2"), "My_Server_v2");
        assert_eq!(tool_prefix_name("a__b"), "a_b");
        assert_eq!(tool_prefix_name("mcp-server-git"), "mcp-server-git");
    }
}
