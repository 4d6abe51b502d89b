//! The environment commands run with: the user's, minus the variables that
//! hold credentials.
//!
//! pincer holds the user's provider keys in its own environment, and a
//! command the model runs should not be able to print them (a prompt
//! injection in a file read earlier only has to ask for `env`). As Codex
//! does, `bash` and `process` children get the environment without
//! pincer's provider credentials (the built-in ones and every variable a
//! configured provider's `api_key_env` names) and without anything whose
//! name looks like a secret: `*_API_KEY`, `*_TOKEN`, `*_SECRET*`,
//! `*PASSWORD*`, in any case. The user's `[shell]` table adjusts this:
//! `env_passthrough` keeps names (or globs) anyway, `env_remove` removes
//! more, and wins over `env_passthrough`. `[shell]` is read from the user's
//! config only — a repository must not be able to hand keys to commands.
//! MCP servers are not covered: they get the environment they are
//! configured with.

use std::ffi::OsString;

use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

/// `[shell]` in the user's `config.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShellConfig {
    /// Variables kept for commands even though their names look like
    /// credentials: names or globs (`GITHUB_TOKEN`, `NPM_*`), any case.
    pub env_passthrough: Vec<String>,
    /// More variables removed from commands' environment: names or globs,
    /// any case. Wins over `env_passthrough`.
    pub env_remove: Vec<String>,
}

/// Variables that hold the credentials of pincer's built-in providers and
/// of its gateway.
const CREDENTIAL_VARIABLES: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "OPENROUTER_API_KEY",
    "PINCER_GATEWAY_TOKEN",
    "PINCER_GATEWAY_PASSWORD",
];

/// Names that look like secrets.
const SECRET_PATTERNS: &[&str] = &["*_API_KEY", "*_TOKEN", "*_SECRET*", "*PASSWORD*"];

/// Decides which variables a command inherits.
#[derive(Clone, Debug)]
pub struct ShellEnv {
    /// Built-in credentials, provider key variables, secret-looking names.
    credentials: Arc<GlobSet>,
    passthrough: Arc<GlobSet>,
    remove: Arc<GlobSet>,
}

impl Default for ShellEnv {
    /// The built-in rules only.
    fn default() -> Self {
        Self::new(&ShellConfig::default(), std::iter::empty::<String>())
    }
}

impl ShellEnv {
    /// The rules of `config` (the user's `[shell]`), also removing the
    /// variables named in `key_variables` (configured providers'
    /// `api_key_env`). A pattern that is not a valid glob is taken as a
    /// plain name.
    pub fn new(config: &ShellConfig, key_variables: impl IntoIterator<Item = String>) -> Self {
        let credentials: Vec<String> = CREDENTIAL_VARIABLES
            .iter()
            .chain(SECRET_PATTERNS)
            .map(|s| s.to_string())
            .chain(key_variables)
            .collect();
        Self {
            credentials: glob_set(&credentials),
            passthrough: glob_set(&config.env_passthrough),
            remove: glob_set(&config.env_remove),
        }
    }

    /// Whether a command inherits the variable `name`.
    pub fn keeps(&self, name: &str) -> bool {
        if self.remove.is_match(name) {
            return false;
        }
        self.passthrough.is_match(name) || !self.credentials.is_match(name)
    }

    /// `vars` without the ones a command must not inherit.
    pub fn filter(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        vars.into_iter()
            .filter(|(name, _)| self.keeps(&name.to_string_lossy()))
            .collect()
    }
}

/// Case-insensitive globs; one that does not parse matches its own text.
/// Compiled once per distinct list, for all sessions.
fn glob_set(patterns: &[String]) -> Arc<GlobSet> {
    crate::tools::globs::set(patterns, compile)
}

fn compile(patterns: &[String]) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = GlobBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .or_else(|_| {
                GlobBuilder::new(&globset::escape(pattern))
                    .case_insensitive(true)
                    .build()
            });
        match glob {
            Ok(glob) => {
                builder.add(glob);
            }
            Err(e) => {
                tracing::warn!(pattern = %pattern, error = %e, "ignoring a [shell] variable pattern")
            }
        }
    }
    builder.build().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "ignoring the [shell] variable patterns");
        GlobSet::empty()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn kept(env: &ShellEnv, names: &[&str]) -> Vec<String> {
        let vars = names
            .iter()
            .map(|n| (OsString::from(n), OsString::from("v")));
        env.filter(vars)
            .into_iter()
            .map(|(n, _)| n.to_string_lossy().to_string())
            .collect()
    }

    const NAMES: &[&str] = &[
        "PATH",
        "HOME",
        "FOO_API_KEY",
        "github_token",
        "MY_SECRET_X",
        "DB_PASSWORD",
        "password_file",
        "ANTHROPIC_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "PINCER_GATEWAY_TOKEN",
        "LAB_KEY",
        "TOKENIZERS_PARALLELISM",
        "EDITOR",
    ];

    #[test]
    fn credentials_and_secret_looking_names_are_removed() {
        assert_eq!(
            kept(&ShellEnv::default(), NAMES),
            [
                "PATH",
                "HOME",
                "AWS_ACCESS_KEY_ID",
                "LAB_KEY",
                "TOKENIZERS_PARALLELISM",
                "EDITOR"
            ]
        );
    }

    #[test]
    fn provider_key_variables_and_env_remove_are_removed_passthrough_kept() {
        let config = ShellConfig {
            env_passthrough: vec!["GITHUB_TOKEN".into(), "db_*".into(), "EDITOR".into()],
            env_remove: vec!["editor".into(), "AWS_*".into(), "[bad".into()],
        };
        let env = ShellEnv::new(&config, ["LAB_KEY".to_string()]);
        assert_eq!(
            kept(&env, NAMES),
            [
                "PATH",
                "HOME",
                "github_token",
                "DB_PASSWORD",
                "TOKENIZERS_PARALLELISM"
            ]
        );
        assert!(!env.keeps("[bad"));
    }
}
