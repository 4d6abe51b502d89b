//! The `claude` process of one session: how it is started, fed and ended.
//!
//! It runs in a process group of its own (like MCP servers and hooks), so
//! that dropping it ends the CLI and anything it started. Its stderr is
//! kept (the last few KB) to explain a failure; stdout is read line by
//! line by the turn. pincer's system prompt goes to it in a file readable
//! by the user alone, removed with the process.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The tools of Claude Code's own that pincer's tools stand in for. The
/// CLI is started with none of its tools (`--tools ""`); naming them again
/// as disallowed keeps them out should a CLI version bring some back.
const CLAUDE_TOOLS: &str = "Bash,BashOutput,KillShell,Edit,MultiEdit,Write,Read,NotebookEdit,Glob,Grep,LS,WebFetch,WebSearch,Task,TodoWrite";

/// The MCP server pincer hosts for the CLI, carried over its control
/// protocol on the same pipes (`"type": "sdk"`).
pub const SERVER_NAME: &str = "pincer";

/// The largest system prompt passed as an argument (Linux takes 128 KiB
/// per argument).
const INLINE_PROMPT: usize = 64 * 1024;

/// How much of the CLI's stderr is kept to explain a failure.
const STDERR_TAIL: usize = 8 * 1024;

/// What a process was started for: a change of any of these needs a new
/// one (which resumes the same Claude Code session).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub program: PathBuf,
    pub model: String,
    pub cwd: PathBuf,
    pub system_prompt: String,
    pub max_turns: u32,
}

/// A running `claude -p` in stream-json mode.
pub struct Process {
    pub key: Key,
    /// The Claude Code session it works on.
    pub session_id: String,
    /// Whether it was started with `--resume` (so an unknown session shows
    /// as a failed resume rather than a failed turn).
    pub resumed: bool,
    /// Whether the control protocol's `initialize` went out.
    pub initialized: bool,
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<String>>,
    prompt_file: Option<PathBuf>,
    next_request: u64,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("program", &self.key.program)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

/// Why the CLI could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(
        "`{}` was not found; install Claude Code (npm install -g @anthropic-ai/claude-code) or set claude_path under the provider in config.toml",
        .0.display()
    )]
    Missing(PathBuf),
    #[error("`{}` could not be started: {source}", .program.display())]
    Failed {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("pincer's system prompt could not be written for Claude Code: {0}")]
    Prompt(std::io::Error),
}

impl Process {
    /// Starts the CLI for `key`, continuing `resume` or starting the
    /// session `session_id`.
    pub fn spawn(key: Key, resume: Option<String>, session_id: String) -> Result<Self, SpawnError> {
        // A prompt that fits an argument goes inline: no file to leave
        // behind if pincer is killed. A larger one goes in a private file.
        let prompt_file = if key.system_prompt.len() > INLINE_PROMPT {
            let file = std::env::temp_dir().join(format!(
                "pincer-claude-code-{}.md",
                uuid::Uuid::new_v4().simple()
            ));
            write_private(&file, &key.system_prompt).map_err(SpawnError::Prompt)?;
            Some(file)
        } else {
            None
        };
        let mut command = tokio::process::Command::new(&key.program);
        command
            .args([
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                // Variadic: the `=` form keeps it from taking what follows.
                "--tools=",
                "--strict-mcp-config",
                "--permission-prompt-tool",
                "stdio",
                "--permission-mode",
                "default",
                "--setting-sources",
                "",
            ])
            .arg(format!("--disallowedTools={CLAUDE_TOOLS}"))
            .arg(format!("--model={}", key.model))
            .arg(format!("--max-turns={}", key.max_turns));
        match &prompt_file {
            Some(file) => command.arg("--system-prompt-file").arg(file),
            None => command.arg(format!("--system-prompt={}", key.system_prompt)),
        };
        match &resume {
            Some(id) => command.arg(format!("--resume={id}")),
            None => command.arg(format!("--session-id={session_id}")),
        };
        // Variadic, so last and in the `=` form.
        command.arg(format!(
            "--mcp-config={}",
            serde_json::json!({"mcpServers": {SERVER_NAME: {"type": "sdk", "name": SERVER_NAME}}})
        ));
        without_pincer_env(&mut command);
        command
            .current_dir(&key.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        crate::process_group::isolate(&mut command);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(source) => {
                if let Some(file) = &prompt_file {
                    let _ = std::fs::remove_file(file);
                }
                return Err(if source.kind() == std::io::ErrorKind::NotFound {
                    SpawnError::Missing(key.program.clone())
                } else {
                    SpawnError::Failed {
                        program: key.program.clone(),
                        source,
                    }
                });
            }
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            if let Some(file) = &prompt_file {
                let _ = std::fs::remove_file(file);
            }
            return Err(SpawnError::Failed {
                program: key.program.clone(),
                source: std::io::Error::other("its pipes were not opened"),
            });
        };
        let tail = Arc::new(Mutex::new(String::new()));
        tokio::spawn(keep_tail(stderr, tail.clone()));
        Ok(Self {
            key,
            session_id: resume.clone().unwrap_or(session_id),
            resumed: resume.is_some(),
            initialized: false,
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            stderr: tail,
            prompt_file,
            next_request: 0,
        })
    }

    /// Writes one protocol line.
    pub async fn send(&mut self, message: &Value) -> std::io::Result<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await
    }

    /// The next stdout line that is JSON; `None` once stdout closed.
    /// Anything else on stdout is logged and skipped. Cancel-safe.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            match self.stdout.next_line().await {
                Ok(Some(line)) if line.trim().is_empty() => continue,
                Ok(Some(line)) => match serde_json::from_str(&line) {
                    Ok(value) => return Some(value),
                    Err(e) => {
                        tracing::warn!(error = %e, "Claude Code wrote a line that is not JSON; skipped");
                    }
                },
                Ok(None) => return None,
                Err(e) => {
                    tracing::warn!(error = %e, "reading Claude Code's output failed");
                    return None;
                }
            }
        }
    }

    /// A fresh id for a control request pincer sends.
    pub fn request_id(&mut self) -> String {
        self.next_request += 1;
        format!("pincer_{}", self.next_request)
    }

    /// The exit status once it has exited (waiting a moment for it after
    /// stdout closed), and the end of what it wrote on stderr.
    pub async fn ended(&mut self) -> (Option<i32>, String) {
        let status =
            tokio::time::timeout(std::time::Duration::from_secs(5), self.child.wait()).await;
        let code = match status {
            Ok(Ok(status)) => status.code(),
            _ => None,
        };
        // The stderr reader may still be draining the last lines.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        (code, self.stderr_tail())
    }

    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().trim().to_string()
    }

    /// Ends it and everything it started.
    pub fn kill(&mut self) {
        self.kill_group();
        let _ = self.child.start_kill();
    }

    fn kill_group(&self) {
        #[cfg(unix)]
        if let Some(pid) = self.child.id().and_then(|pid| i32::try_from(pid).ok()) {
            crate::process_group::signal_group(
                crate::process_group::Pid::from_raw(pid),
                crate::process_group::Signal::SIGKILL,
            );
        }
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(file) = &self.prompt_file {
            let _ = std::fs::remove_file(file);
        }
        self.kill_group();
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of the CLI's stderr, and logs it.
async fn keep_tail(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut reader = BufReader::new(stderr);
    let mut buf = vec![0u8; 4096];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                tracing::debug!(target: "pincer::claude_code", "stderr: {}", text.trim_end());
                {
                    let mut tail = tail.lock();
                    tail.push_str(&text);
                    if tail.len() > STDERR_TAIL {
                        let mut cut = tail.len() - STDERR_TAIL;
                        while !tail.is_char_boundary(cut) {
                            cut += 1;
                        }
                        tail.drain(..cut);
                    }
                }
            }
        }
    }
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(text.as_bytes())
}

/// What `claude auth status` says, when it says it in the form pincer
/// knows: `Some(false)` only when it reports no login.
pub async fn logged_in(program: &Path, cwd: &Path) -> Option<bool> {
    let mut command = tokio::process::Command::new(program);
    without_pincer_env(&mut command);
    command
        .args(["auth", "status"])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    crate::process_group::isolate(&mut command);
    let output = tokio::time::timeout(std::time::Duration::from_secs(20), command.output())
        .await
        .ok()?
        .ok()?;
    let status: Value = serde_json::from_slice(&output.stdout).ok()?;
    status.get("loggedIn").and_then(Value::as_bool)
}

/// pincer's own settings and secrets (its home, a gateway token) are not
/// the CLI's business: it gets the user's environment without them.
fn without_pincer_env(command: &mut tokio::process::Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PINCER_") {
            command.env_remove(&name);
        }
    }
}
