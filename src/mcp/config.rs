//! The `[mcp]` section of `config.toml`: pincer's own servers, timeouts,
//! and each server's allow / deny lists (the tool policy's MCP scope).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    Confined, DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, Origin, ServerSpec, Transport,
};

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
    /// How a stdio server is confined: in the session's sandbox (unset or
    /// `true`), unconfined (`false`), or with `[sandbox]` keys of its own
    /// over the session's (`{ network = "on" }`). Only the user's file
    /// may say so; a project's server runs in the session's sandbox.
    pub sandbox: Option<ServerSandbox>,
}

/// `sandbox` of one `[mcp.servers.<name>]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "`sandbox` of an MCP server is true, false or a table of [sandbox] keys"
)]
pub enum ServerSandbox {
    Confined(bool),
    With(crate::tools::sandbox::SandboxConfig),
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
                        confined: Confined::No,
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
                    confined: Confined::No,
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

    #[test]
    fn stdio_servers_are_confined_unless_the_user_s_table_says_not_to() {
        use crate::tools::sandbox::{Sandbox, SandboxConfig, SandboxMode, Settings};
        let config = parse(
            "[servers.plain]\ncommand = \"a\"\n[servers.free]\ncommand = \"b\"\nsandbox = false\n[servers.online]\ncommand = \"c\"\nsandbox = { network = \"on\" }\n[servers.web]\nurl = \"http://w\"\n",
        );
        assert_eq!(
            config.servers["online"].sandbox,
            Some(ServerSandbox::With(SandboxConfig {
                network: Some(crate::tools::sandbox::Network::On),
                ..SandboxConfig::default()
            }))
        );
        let bad = toml::from_str::<McpConfig>("[servers.x]\ncommand = \"a\"\nsandbox = \"yes\"\n");
        assert!(
            bad.unwrap_err()
                .to_string()
                .contains("true, false or a table"),
            "a clear error"
        );
        let cwd = std::path::Path::new("/project");
        let mut specs = config.specs(cwd);
        // A project's server with the same wish: not the project's to make.
        let mut project = config.project_specs(
            &parse("[servers.theirs]\ncommand = \"d\"\nsandbox = false\n").servers,
            cwd,
        );
        if let Some(ServerSpec { name, .. }) = project.first_mut() {
            *name = "free".into();
        }
        specs.extend(project);
        let confined = |mode| {
            let settings = Settings {
                mode,
                ..Settings::from_config(&SandboxConfig::default(), None)
            };
            let sandbox = Sandbox::new(settings, None, None, Vec::new());
            super::super::confine(specs.clone(), Some(&sandbox), &config)
                .into_iter()
                .map(|s| match s.transport {
                    Transport::Stdio { confined, .. } => (s.name, s.origin, Some(confined)),
                    Transport::Http { .. } => (s.name, s.origin, None),
                })
                .collect::<Vec<_>>()
        };
        // A library's test has no launcher: what should be confined says
        // it cannot be, and how to run it anyway.
        let why = |name: &str| {
            Some(Confined::Unavailable(format!(
                "cannot be confined by the sandbox here (only the pincer program can confine commands); set `sandbox = false` in its [mcp.servers.{name}] table to run it unconfined"
            )))
        };
        assert_eq!(
            confined(SandboxMode::WorkspaceWrite),
            vec![
                ("free".into(), Origin::Config, Some(Confined::No)),
                ("online".into(), Origin::Config, why("online")),
                ("plain".into(), Origin::Config, why("plain")),
                ("web".into(), Origin::Config, None),
                ("free".into(), Origin::Project, why("free")),
            ]
        );
        // The session's sandbox off: nothing is confined.
        assert!(
            confined(SandboxMode::Off)
                .iter()
                .all(|(_, _, c)| matches!(c, None | Some(Confined::No)))
        );
    }
}
