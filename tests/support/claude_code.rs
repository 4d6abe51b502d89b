//! Anthropic's real Claude Code CLI for the tests that run it against the
//! mock model (`ANTHROPIC_BASE_URL`): where the executable is, and the
//! environment that keeps it offline, non-interactive and inside the test's
//! temp home. `.ci/claude-code` installs it (npm, pinned); the tests never
//! skip when it is missing, they install it or fail saying how.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The release `.ci/claude-code` installs; `claude --version` reports it.
pub const CLAUDE_CODE_VERSION: &str = "2.1.197";

/// The native `claude` executable: `$PINCER_TEST_CLAUDE` if set (`.ci/run`
/// exports it), else what `.ci/claude-code` prints (it installs the CLI the
/// first time, under a lock, into ~/.cache/pincer-ci/claude-code, and only
/// prints the path afterwards).
pub fn claude_cli() -> PathBuf {
    if let Some(path) = std::env::var_os("PINCER_TEST_CLAUDE") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "PINCER_TEST_CLAUDE is {}, which is not a file: unset it or run `.ci/claude-code` \
             and use the path it prints",
            path.display()
        );
        return path;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/claude-code");
    let output = std::process::Command::new(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = stdout
        .lines()
        .find_map(|line| line.strip_prefix("PINCER_TEST_CLAUDE="))
        .map(PathBuf::from);
    match path {
        Some(path) if output.status.success() && path.is_file() => path,
        _ => panic!(
            "the real Claude Code CLI is missing and `.ci/claude-code` could not install it \
             ({}; it needs npm and network access to install \
             @anthropic-ai/claude-code@{CLAUDE_CODE_VERSION} into ~/.cache/pincer-ci/claude-code \
             or $PINCER_CLAUDE_CODE_DIR); it printed: {stdout}. Run it by hand, or set \
             PINCER_TEST_CLAUDE to a claude {CLAUDE_CODE_VERSION} executable",
            output.status
        ),
    }
}

/// The environment for the real CLI against the mock model at
/// `mock_anthropic_url`, with `home` (the test's temp home) as its home and
/// config dir. Pass it with `Command::envs` (on top of `env_clear()` plus
/// `PATH`, or of the test's own environment).
pub fn claude_env(mock_anthropic_url: &str, home: &Path) -> Vec<(String, String)> {
    let home = home.display().to_string();
    [
        ("ANTHROPIC_BASE_URL", mock_anthropic_url.to_string()),
        // A dummy key: the CLI then calls the base URL with `x-api-key`,
        // and never looks for a login.
        ("ANTHROPIC_API_KEY", "pincer-test-dummy-key".to_string()),
        // As root (CI containers) the CLI refuses some permission modes
        // unless it is told it runs in a sandbox.
        ("IS_SANDBOX", "1".to_string()),
        // No telemetry, error reports or update checks: the test runs
        // offline, and nothing but the mock is called.
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
        ("DISABLE_AUTOUPDATER", "1".to_string()),
        // Sessions, settings and memory stay in the test's temp home.
        ("HOME", home.clone()),
        ("CLAUDE_CONFIG_DIR", format!("{home}/.claude")),
        // A mock that answers an error fails the turn at once instead of
        // after the CLI's default ten retries with backoff.
        ("CLAUDE_CODE_MAX_RETRIES", "1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
