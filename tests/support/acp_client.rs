//! A small ACP client for end-to-end tests: spawns the real `pincer acp`
//! binary with its own `PINCER_HOME` and working directory, writes requests
//! as NDJSON and reads what comes back, checking that every stdout line is a
//! JSON-RPC message. A line that is not fails the test in the test's own
//! task (at `next()` when it is its turn, and at `wait_exit()` for lines
//! nobody read), with the line in the message: a panic in the reader task
//! would be swallowed.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

pub const TIMEOUT: Duration = Duration::from_secs(20);

/// How long a test waits on a large Node program (OpenClaw's bridge, the
/// real `claude` CLI) that it drives or that pincer drives: starting one
/// on a loaded two-core machine, beside two browsers, took longer than
/// `TIMEOUT` in CI. A wait is a bound on failure, never a pass condition.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(90);

/// A temporary home and project for one test.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        Self { dir }
    }

    /// One outside the system's temp dir (in the target directory), as a
    /// user's home and projects are: the sandbox lets commands write the
    /// temp dir, so a test of what they may not write needs places
    /// elsewhere.
    pub fn outside_temp() -> Self {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        Self { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The project directory (the session cwd), canonical so that paths in
    /// updates compare equal.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work").canonicalize().unwrap()
    }

    pub fn write(&self, relative: &str, contents: &str) -> PathBuf {
        let path = self.work().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// A `pincer` command with a clean environment: no real keys, no real
    /// home, logs quiet, and commands unsandboxed (`PINCER_SANDBOX=off`):
    /// most tests are about what asks and what runs without the sandbox;
    /// `tests/it/sandbox.rs` and the tests of sessions nobody watches
    /// remove the variable and run the sandbox as users have it.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pincer"));
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("PINCER_HOME", self.home())
            .env("PINCER_SANDBOX", "off")
            .env("RUST_LOG", "warn")
            .current_dir(self.work())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }
}

/// A running `pincer acp`.
pub struct Acp {
    pub child: Child,
    stdin: Option<ChildStdin>,
    /// Each stdout line, or why it is not JSON-RPC.
    lines: mpsc::UnboundedReceiver<Result<Value, String>>,
    /// Every stdout line that was not JSON-RPC, for `wait_exit`.
    violations: Arc<Mutex<Vec<String>>>,
    reader: Option<tokio::task::JoinHandle<()>>,
    /// Messages read but not yet consumed.
    backlog: VecDeque<Value>,
    next_id: i64,
    pub stderr: tokio::task::JoinHandle<String>,
    /// The stderr read so far, for a failure's message.
    stderr_so_far: Arc<Mutex<String>>,
    /// The last messages `next` returned, for a failure's message.
    recent: VecDeque<Value>,
    /// How long `next` and `wait_exit` wait.
    timeout: Duration,
}

/// How many of the last messages a timeout in `next` shows.
const RECENT: usize = 12;

impl Acp {
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let violations = Arc::new(Mutex::new(Vec::new()));
        let seen = violations.clone();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).split(b'\n');
            while let Ok(Some(line)) = lines.next_segment().await {
                let message = check_json_rpc_line(&line);
                if let Err(violation) = &message {
                    seen.lock().unwrap().push(violation.clone());
                }
                // The test may have stopped reading; the violation is kept.
                let _ = tx.send(message);
            }
        });
        let stderr_so_far = Arc::new(Mutex::new(String::new()));
        let so_far = stderr_so_far.clone();
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                text.push_str(&line);
                text.push('\n');
                let mut so_far = so_far.lock().unwrap();
                so_far.push_str(&line);
                so_far.push('\n');
            }
            text
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            violations,
            reader: Some(reader),
            backlog: VecDeque::new(),
            next_id: 0,
            stderr,
            stderr_so_far,
            recent: VecDeque::new(),
            timeout: TIMEOUT,
        }
    }

    /// Waits up to `timeout` (instead of `TIMEOUT`) for each message and
    /// for the exit.
    pub fn waiting(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Writes `bytes` as they are (plus a newline): for lines that are not
    /// UTF-8 or not JSON.
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is closed");
        stdin.write_all(bytes).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is closed");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sends a request and returns its id.
    pub async fn send(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&line.to_string()).await;
        id
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(&line.to_string()).await;
    }

    pub async fn respond(&mut self, id: &Value, result: Value) {
        let line = json!({"jsonrpc": "2.0", "id": id, "result": result});
        self.send_raw(&line.to_string()).await;
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next message from pincer, within `TIMEOUT` (or the time given
    /// to `waiting`).
    /// A timeout panics with the last messages and the process's stderr.
    pub async fn next(&mut self) -> Value {
        let message = match self.backlog.pop_front() {
            Some(v) => v,
            None => match tokio::time::timeout(self.timeout, self.lines.recv()).await {
                Ok(Some(Ok(v))) => v,
                Ok(Some(Err(violation))) => panic!("{violation}"),
                Ok(None) => panic!("pincer closed stdout"),
                Err(_) => panic!(
                    "no message from pincer within {:?}\nthe last messages:\n{}\nits stderr:\n{}",
                    self.timeout,
                    self.recent
                        .iter()
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                    self.stderr_so_far.lock().unwrap()
                ),
            },
        };
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(message.clone());
        message
    }

    /// Reads until the response to `id`; returns it and everything before.
    pub async fn until_response(&mut self, id: i64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message.get("method").is_none() && message["id"] == json!(id) {
                return (message, before);
            }
            before.push(message);
        }
    }

    /// Sends a request and waits for its result (panics on an error).
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        let (response, _) = self.until_response(id).await;
        assert!(
            response.get("error").is_none(),
            "{method} failed: {response}"
        );
        response["result"].clone()
    }

    pub async fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await
    }

    pub async fn new_session(&mut self, cwd: &Path) -> String {
        let result = self
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        result["sessionId"].as_str().unwrap().to_string()
    }

    /// Waits for the process to exit within `TIMEOUT` (or the time given
    /// to `waiting`), then fails if any stdout line was not JSON-RPC (also
    /// lines nobody read).
    pub async fn wait_exit(&mut self) -> std::process::ExitStatus {
        let status = tokio::time::timeout(self.timeout, self.child.wait())
            .await
            .expect("pincer did not exit")
            .unwrap();
        // Its stdout ends with it, unless a descendant still holds it open;
        // then the lines read so far are what can be checked.
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(TIMEOUT, reader).await;
        }
        self.assert_stdout_was_json_rpc();
        status
    }

    /// Every stdout line so far that was not JSON-RPC, with the reason.
    pub fn stdout_violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    pub fn assert_stdout_was_json_rpc(&self) {
        let violations = self.stdout_violations();
        assert!(violations.is_empty(), "{}", violations.join("\n"));
    }
}

/// Checks one stdout line (without its newline): a JSON object with
/// `"jsonrpc": "2.0"` that is a request, a notification or a response.
pub fn check_json_rpc_line(line: &[u8]) -> Result<Value, String> {
    let shown = String::from_utf8_lossy(line);
    let shown: String = shown.chars().take(2000).collect();
    let fail = |why: String| {
        Err(format!(
            "pincer wrote a stdout line that is not JSON-RPC ({why}): {shown}"
        ))
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => return fail(format!("not JSON: {e}")),
    };
    if value.get("jsonrpc") != Some(&json!("2.0")) {
        return fail("no \"jsonrpc\": \"2.0\"".to_string());
    }
    let id_ok = |id: &Value| id.is_null() || id.is_string() || id.is_i64();
    let shape_ok = match (value.get("method"), value.get("id")) {
        (Some(method), id) => method.is_string() && id.is_none_or(id_ok),
        (None, Some(id)) => {
            id_ok(id) && (value.get("result").is_some() != value.get("error").is_some())
        }
        (None, None) => false,
    };
    if !shape_ok {
        return fail("neither a request, a notification nor a response".to_string());
    }
    Ok(value)
}

/// The `update`s of the session/update notifications among `messages`,
/// without the session-level ones tested on their own:
/// `session_info_update` (the title, which carries a time) and
/// `available_commands_update` (the slash commands).
pub fn updates_of(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .filter(|u| {
            u["sessionUpdate"] != "session_info_update"
                && u["sessionUpdate"] != "available_commands_update"
        })
        .collect()
}

/// Joins consecutive message/thought chunks so tests don't depend on how a
/// stream was split.
pub fn coalesce(updates: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for update in updates {
        let kind = update["sessionUpdate"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if (kind == "agent_message_chunk" || kind == "agent_thought_chunk")
            && let Some(last) = out.last_mut()
            && last["sessionUpdate"] == kind.as_str()
        {
            let joined = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap_or_default(),
                update["content"]["text"].as_str().unwrap_or_default()
            );
            last["content"]["text"] = Value::String(joined);
            continue;
        }
        out.push(update);
    }
    out
}

impl Acp {
    /// Initializes with the given client capabilities.
    pub async fn initialize_with(&mut self, capabilities: Value) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await
    }

    /// Reads until the response to `id`, answering every request pincer
    /// makes of the client with `answer(method, params)`. Returns the
    /// response and every message before it (requests included).
    pub async fn drive(
        &mut self,
        id: i64,
        mut answer: impl FnMut(&str, &Value) -> Value,
    ) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message.get("method").is_none() && message["id"] == json!(id) {
                return (message, before);
            }
            if let (Some(method), Some(request_id)) =
                (message["method"].as_str(), message.get("id"))
            {
                let result = answer(method, &message["params"]);
                let request_id = request_id.clone();
                self.respond(&request_id, result).await;
            }
            before.push(message);
        }
    }
}

/// The requests pincer made of the client, by method.
pub fn requests_of<'a>(messages: &'a [Value], method: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == method && m.get("id").is_some())
        .collect()
}

/// Whether a process whose command line contains `marker` is running.
pub fn process_running(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .map(|cmd| {
                String::from_utf8_lossy(&cmd)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

/// A `sleep` duration no other test (or concurrent test run) uses, such as
/// `300.123456789012345`: a marker for `process_running` that finds only
/// this test's processes.
pub fn unique_sleep() -> String {
    let digits = uuid::Uuid::new_v4().as_u128() % 10u128.pow(15);
    format!("300.{digits:015}")
}

/// The peak resident memory of process `pid` (`VmHWM`), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/PID/status");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmHWM in kB");
    kb * 1024
}

/// Children of process `pid` that are zombies (exited, not yet reaped).
pub fn zombie_children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
            (fields.first() == Some(&"Z") && fields.get(1)?.parse::<u32>().ok()? == pid)
                .then_some(child)
        })
        .collect()
}
