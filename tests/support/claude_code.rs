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

/// `claude ARGS…` in `cwd` against the mock at `mock_anthropic_url`, with
/// only `PATH` and [`claude_env`] (no real key, login or home), all three
/// standard streams piped and the process killed when dropped.
pub fn claude_command(
    mock_anthropic_url: &str,
    home: &Path,
    cwd: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(claude_cli());
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(claude_env(mock_anthropic_url, home))
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A running `claude -p --input-format stream-json --output-format
/// stream-json …`: NDJSON lines in and out, each wait bounded by one
/// deadline for the whole run.
pub struct StreamJson {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    stderr: tokio::task::JoinHandle<String>,
    deadline: tokio::time::Instant,
}

impl StreamJson {
    /// Spawns `cmd` (from [`claude_command`]); every later wait fails after
    /// `timeout` from now.
    pub fn spawn(mut cmd: tokio::process::Command, timeout: std::time::Duration) -> Self {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let mut child = cmd.spawn().unwrap();
        let mut err = child.stderr.take().unwrap();
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text).await;
            text
        });
        Self {
            stdin: child.stdin.take(),
            lines: tokio::io::BufReader::new(child.stdout.take().unwrap()).lines(),
            child,
            stderr,
            deadline: tokio::time::Instant::now() + timeout,
        }
    }

    /// Writes one line.
    pub async fn send(&mut self, line: serde_json::Value) {
        use tokio::io::AsyncWriteExt;
        let stdin = self
            .stdin
            .as_mut()
            .expect("the CLI's stdin is already closed");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    /// The next stdout line, parsed.
    pub async fn next(&mut self) -> serde_json::Value {
        let line = tokio::time::timeout_at(self.deadline, self.lines.next_line())
            .await
            .expect("no line from the CLI before the deadline")
            .unwrap()
            .unwrap_or_else(|| panic!("the CLI closed its stdout"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("the CLI wrote {line:?}: {e}"))
    }

    /// Closes stdin (the CLI exits after its turn) and waits for the exit:
    /// its status and everything it wrote to stderr.
    pub async fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let status = tokio::time::timeout_at(self.deadline, self.child.wait())
            .await
            .expect("the CLI did not exit before the deadline")
            .unwrap();
        (status, self.stderr.await.unwrap())
    }
}
