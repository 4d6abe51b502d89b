//! The `bash` tool: runs a shell command for the model and reports what it
//! printed and how it ended.
//!
//! When the editor offers terminals, the command runs in one of them so the
//! user watches it live; otherwise pincer runs it itself under a
//! pseudo-terminal. A PTY rather than pipes because programs talk to a
//! terminal the way they talk to a person: line-buffered output arrives as it
//! is printed (so progress can be streamed), and tools that refuse to run or
//! buffer forever without a TTY behave. Stdin is `/dev/null`, so a command that
//! waits for input gets end-of-file instead of hanging, and `TERM=dumb`,
//! `PAGER=cat` and `GIT_TERMINAL_PROMPT=0` keep colours, pagers and password
//! prompts away. Escape sequences and control characters that still come
//! through are removed, and carriage-return redraws keep only the last state
//! of the line, before the model sees anything.
//!
//! The shell is a session leader with its own process group (portable-pty
//! calls `setsid`), so a timeout, a cancel, or the tool's future being dropped
//! kills the whole group — pipelines and background jobs included — rather
//! than just `bash`. The group is also killed once the shell exits, because a
//! backgrounded grandchild would otherwise keep the PTY open and the command
//! would never seem to end; use a dedicated tool for long-running servers.
//!
//! The model gets the last 2,000 lines or 50 KB of output, whichever is
//! smaller, cut at line boundaries (a single longer line keeps its tail),
//! because the end of a build or test log is where the verdict is. When output
//! is cut, all of it goes to a file in the system temp directory, named in a
//! note at the end, so the model can grep it instead of running the command
//! again. Output is kept in memory only up to what the result needs; the
//! rest is streamed to that file as it arrives.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use portable_pty::{CommandBuilder, MasterPty, PtyPair, PtySize, native_pty_system};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use super::{
    CallInfo, Display, TerminalCommand, TerminalExit, Terminals, Tool, ToolContext, ToolKind,
    ToolOutput,
};

/// Most lines of output the model sees.
const MAX_LINES: usize = 2_000;
/// Most bytes of output the model sees.
const MAX_BYTES: usize = 50 * 1024;
/// Output an editor terminal keeps for us (it drops the oldest beyond this).
const TERMINAL_OUTPUT_LIMIT: u64 = 1024 * 1024;
/// A line longer than this has its head moved to the full-output file, so one
/// endless line cannot fill memory.
const LINE_SPILL_BYTES: usize = 2 * MAX_BYTES;
/// How often the editor is shown the output so far.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);
/// How much of the output the live view shows.
const PROGRESS_TAIL_BYTES: usize = 4 * 1024;
/// How often the shell is checked for having exited.
const EXIT_POLL: Duration = Duration::from_millis(20);
/// After the shell exits, output that keeps arriving with gaps shorter than
/// this is still collected...
const EXIT_IDLE: Duration = Duration::from_millis(100);
/// ...but for no longer than this, in case a leftover process keeps printing.
const EXIT_DRAIN: Duration = Duration::from_secs(1);
/// How long a killed group gets to close the PTY before we stop reading.
const KILL_DRAIN: Duration = Duration::from_millis(500);
/// How long the shell gets to exit on SIGTERM before the group is SIGKILLed.
const TERM_GRACE: Duration = Duration::from_millis(500);
/// How long to wait for the shell to die after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long one request to the editor's terminal may take once we are done.
const EDITOR_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest call title, in characters.
const MAX_TITLE_CHARS: usize = 120;

// Arguments of a `bash` call; the field docs are the schema the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct BashInput {
    /// The shell command to run.
    pub command: String,
    /// Seconds before the command is killed; default none.
    pub timeout: Option<u64>,
}

/// Built with `BashTool::default()`; the private field leaves room for
/// settings without changing how it is made.
#[derive(Clone, Copy, Debug, Default)]
pub struct BashTool {
    _private: (),
}

impl Tool for BashTool {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn description(&self) -> &'static str {
        "Run a command in bash in the working directory. stdout and stderr are merged; stdin is \
         empty. The output is truncated to the last 2000 lines or 50 KB, whichever comes first; \
         when it is, the full output is saved to a file whose path is given at the end. A \
         non-zero exit code makes the result an error. Optionally set timeout (seconds) to kill \
         commands that may hang. Background processes are killed when the command ends."
    }

    fn parameters(&self) -> serde_json::Value {
        super::schema_for::<BashInput>()
    }

    fn describe(&self, args: &serde_json::Value, _cwd: &Path) -> CallInfo {
        let command = args
            .get("command")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        CallInfo {
            title: title(command),
            kind: ToolKind::Execute,
            locations: Vec::new(),
        }
    }

    fn mutating(&self) -> bool {
        true
    }

    fn permission_scopes(&self, args: &serde_json::Value) -> Vec<String> {
        let command = args
            .get("command")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let scopes = command_prefixes(command);
        if scopes.is_empty() {
            // Nothing recognisable as a command (only assignments, comments,
            // or nothing): remember exactly this text, never the whole tool.
            vec![command.trim().to_string()]
        } else {
            scopes
        }
    }

    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: BashInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            if ctx.cancel.is_cancelled() {
                return ToolOutput::error("Command aborted");
            }
            let timeout = input.timeout.filter(|&seconds| seconds > 0);
            match &ctx.terminals {
                Some(terminals) => {
                    run_in_terminal(Arc::clone(terminals), &input.command, timeout, ctx).await
                }
                None => run_local(&input.command, timeout, ctx).await,
            }
        })
    }
}

/// The command's first line, shortened to fit a title.
fn title(command: &str) -> String {
    let mut lines = command.lines().map(str::trim).filter(|l| !l.is_empty());
    let Some(first) = lines.next() else {
        return "bash".to_string();
    };
    if first.chars().count() > MAX_TITLE_CHARS {
        let mut cut: String = first.chars().take(MAX_TITLE_CHARS - 1).collect();
        cut.push('…');
        cut
    } else if lines.next().is_some() {
        format!("{first} …")
    } else {
        first.to_string()
    }
}

/// How a command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Exited {
        code: Option<u32>,
        signal: Option<String>,
    },
    TimedOut(u64),
    Cancelled,
}

// ---------------------------------------------------------------------------
// Running in the editor's terminal

async fn run_in_terminal(
    terminals: Arc<dyn Terminals>,
    command: &str,
    timeout: Option<u64>,
    ctx: &ToolContext,
) -> ToolOutput {
    let request = TerminalCommand {
        command: "bash".to_string(),
        args: vec!["-c".to_string(), command.to_string()],
        cwd: ctx.cwd.clone(),
        env: Vec::new(),
        output_byte_limit: Some(TERMINAL_OUTPUT_LIMIT),
    };
    let id = tokio::select! {
        created = terminals.create(request) => match created {
            Ok(id) => id,
            Err(e) => {
                return ToolOutput::error(format!(
                    "Could not start the command in the editor's terminal: {e}"
                ));
            }
        },
        () = ctx.cancel.cancelled() => return ToolOutput::error("Command aborted"),
    };
    let mut guard = TerminalGuard {
        terminals: Arc::clone(&terminals),
        id: id.clone(),
        armed: true,
    };
    (ctx.progress)(vec![Display::Terminal(id.clone())]);

    let deadline = timeout.map(|seconds| Instant::now() + Duration::from_secs(seconds));
    let waited = tokio::select! {
        exit = terminals.wait_for_exit(&id) => Some(exit),
        () = sleep_until(deadline) => None,
        () = ctx.cancel.cancelled() => None,
    };
    let unknown = Outcome::Exited {
        code: None,
        signal: None,
    };
    let (mut outcome, mut failure) = match waited {
        Some(Ok(TerminalExit { exit_code, signal })) => (
            Outcome::Exited {
                code: exit_code,
                signal,
            },
            None,
        ),
        Some(Err(e)) => (
            unknown.clone(),
            Some(format!(
                "Lost track of the command in the editor's terminal: {e}"
            )),
        ),
        None if ctx.cancel.is_cancelled() => (Outcome::Cancelled, None),
        None => (Outcome::TimedOut(timeout.unwrap_or_default()), None),
    };
    if failure.is_some() || !matches!(outcome, Outcome::Exited { .. }) {
        let _ = tokio::time::timeout(EDITOR_CALL_TIMEOUT, terminals.kill(&id)).await;
    }

    let mut buffer = OutputBuffer::default();
    let mut dropped_by_editor = false;
    match tokio::time::timeout(EDITOR_CALL_TIMEOUT, terminals.output(&id)).await {
        Ok(Ok(output)) => {
            buffer.push(output.output.as_bytes());
            dropped_by_editor = output.truncated;
            // Some editors report the exit only with the output.
            if failure.is_none()
                && outcome == unknown
                && let Some(exit) = output.exit
            {
                outcome = Outcome::Exited {
                    code: exit.exit_code,
                    signal: exit.signal,
                };
            }
        }
        Ok(Err(e)) => {
            failure.get_or_insert(format!(
                "Could not get the command's output from the editor's terminal: {e}"
            ));
        }
        Err(_) => {
            failure.get_or_insert(
                "The editor's terminal did not return the command's output in time".to_string(),
            );
        }
    }
    let _ = tokio::time::timeout(EDITOR_CALL_TIMEOUT, terminals.release(&id)).await;
    guard.armed = false;

    let mut rendered = buffer.finish();
    if dropped_by_editor {
        rendered.truncated = true;
        let dropped = "[Earlier output was dropped by the editor's terminal.]";
        rendered.note = Some(match rendered.note.take() {
            Some(note) => format!("{note}\n{dropped}"),
            None => dropped.to_string(),
        });
    }
    let mut output = tool_output(&outcome, &rendered);
    if let Some(failure) = failure {
        output = ToolOutput {
            content: vec![crate::llm::Content::text(join_message(
                &shown_text(&rendered),
                &failure,
            ))],
            is_error: true,
            ..output
        };
    }
    ToolOutput {
        display: vec![Display::Terminal(id)],
        ..output
    }
}

/// Kills and releases the editor's terminal if the call is dropped midway.
struct TerminalGuard {
    terminals: Arc<dyn Terminals>,
    id: String,
    armed: bool,
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let terminals = Arc::clone(&self.terminals);
            let id = std::mem::take(&mut self.id);
            runtime.spawn(async move {
                let _ = tokio::time::timeout(EDITOR_CALL_TIMEOUT, terminals.kill(&id)).await;
                let _ = tokio::time::timeout(EDITOR_CALL_TIMEOUT, terminals.release(&id)).await;
            });
        }
    }
}

// ---------------------------------------------------------------------------
// Running locally under a PTY

async fn run_local(command: &str, timeout: Option<u64>, ctx: &ToolContext) -> ToolOutput {
    if !ctx.cwd.is_dir() {
        return ToolOutput::error(format!(
            "The working directory {} does not exist or is not a directory, so the command \
             was not run.",
            ctx.cwd.display()
        ));
    }
    let (mut process, mut chunks) = match LocalProcess::spawn(command, &ctx.cwd) {
        Ok(started) => started,
        Err(e) => return ToolOutput::error(format!("Could not run the command: {e}")),
    };

    let mut output = OutputBuffer::default();
    let deadline = timeout.map(|seconds| Instant::now() + Duration::from_secs(seconds));
    let mut exit_poll = tokio::time::interval(EXIT_POLL);
    exit_poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut progress_tick = tokio::time::interval(PROGRESS_INTERVAL);
    progress_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut reported_version = 0;
    let mut reading = true;

    let outcome = loop {
        tokio::select! {
            () = ctx.cancel.cancelled() => break Outcome::Cancelled,
            () = sleep_until(deadline) => break Outcome::TimedOut(timeout.unwrap_or_default()),
            chunk = chunks.recv(), if reading => match chunk {
                Some(bytes) => output.push(&bytes),
                None => reading = false,
            },
            _ = exit_poll.tick() => {
                if let Some(outcome) = process.try_wait() {
                    break outcome;
                }
            }
            _ = progress_tick.tick() => {
                if output.version() != reported_version {
                    reported_version = output.version();
                    (ctx.progress)(vec![Display::Text(output.tail(PROGRESS_TAIL_BYTES))]);
                }
            }
        }
    };

    if matches!(outcome, Outcome::Exited { .. }) {
        // The shell is gone; collect what is still in flight. Silence with the
        // PTY still open means a leftover process holds it.
        drain(
            &mut chunks,
            &mut output,
            &mut reading,
            Some(EXIT_IDLE),
            EXIT_DRAIN,
        )
        .await;
        process.kill_group();
    } else {
        process.terminate().await;
    }
    drain(&mut chunks, &mut output, &mut reading, None, KILL_DRAIN).await;
    drop(chunks);

    let rendered = output.finish();
    let result = tool_output(&outcome, &rendered);
    let shown = result.text();
    ToolOutput {
        display: vec![Display::Text(shown)],
        ..result
    }
}

/// Moves output from the reader into `output` until the PTY closes, no
/// output came for `idle` (when given), or `limit` has passed.
async fn drain(
    chunks: &mut mpsc::Receiver<Vec<u8>>,
    output: &mut OutputBuffer,
    reading: &mut bool,
    idle: Option<Duration>,
    limit: Duration,
) {
    let end = Instant::now() + limit;
    while *reading {
        let until = idle.map_or(end, |idle| (Instant::now() + idle).min(end));
        match tokio::time::timeout_at(until, chunks.recv()).await {
            Ok(Some(bytes)) => output.push(&bytes),
            Ok(None) => *reading = false,
            Err(_) => break,
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The shell and its process group. Dropping it kills the group, so no path
/// out of a call (including the call's future being dropped) leaves
/// processes behind.
struct LocalProcess {
    /// The shell's pid, which is also its process group id.
    pid: Pid,
    child: Option<Box<dyn portable_pty::Child + Send + Sync>>,
    /// Holds the PTY open while we read it.
    _master: Box<dyn MasterPty + Send>,
    reaped: bool,
    group_killed: bool,
}

impl LocalProcess {
    /// Starts `bash -c command` on a new PTY, and a thread that reads it.
    fn spawn(command: &str, cwd: &Path) -> Result<(Self, mpsc::Receiver<Vec<u8>>), String> {
        let PtyPair { slave, master } = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| format!("could not open a pseudo-terminal: {e:#}"))?;
        let mut builder = CommandBuilder::new("bash");
        builder.arg("-c");
        // Same line, so line numbers in bash's messages match the command.
        builder.arg(format!("exec </dev/null; {command}"));
        builder.cwd(cwd);
        builder.env("PWD", cwd);
        builder.env("TERM", "dumb");
        builder.env("PAGER", "cat");
        builder.env("GIT_PAGER", "cat");
        builder.env("GIT_TERMINAL_PROMPT", "0");
        let child = slave
            .spawn_command(builder)
            .map_err(|e| format!("could not start bash: {e:#}"))?;
        // Only the child may hold the slave side, so the PTY closes with it.
        drop(slave);

        let raw_pid = child.process_id().and_then(|pid| i32::try_from(pid).ok());
        let Some(raw_pid) = raw_pid else {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            return Err("bash started without a process id".to_string());
        };
        let process = Self {
            pid: Pid::from_raw(raw_pid),
            child: Some(child),
            _master: master,
            reaped: false,
            group_killed: false,
        };
        let reader = process
            ._master
            .try_clone_reader()
            .map_err(|e| format!("could not read the pseudo-terminal: {e:#}"))?;
        let chunks = spawn_reader(reader).map_err(|e| format!("could not start a thread: {e}"))?;
        Ok((process, chunks))
    }

    /// The shell's exit, once it has exited.
    fn try_wait(&mut self) -> Option<Outcome> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => {
                self.reaped = true;
                Some(match status.signal() {
                    Some(signal) => Outcome::Exited {
                        code: None,
                        signal: Some(signal.to_string()),
                    },
                    None => Outcome::Exited {
                        code: Some(status.exit_code()),
                        signal: None,
                    },
                })
            }
            // Someone else reaped it; it is gone all the same.
            Err(_) => {
                self.reaped = true;
                Some(Outcome::Exited {
                    code: None,
                    signal: None,
                })
            }
        }
    }

    /// SIGKILLs everything left in the group.
    fn kill_group(&mut self) {
        // ESRCH (nothing left) is fine. The group id stays reserved while any
        // member lives, so this cannot reach an unrelated group in practice.
        let _ = killpg(self.pid, Signal::SIGKILL);
        self.group_killed = true;
    }

    /// SIGTERM to the group, a short grace for the shell, then SIGKILL, and
    /// waits for the shell to be gone.
    async fn terminate(&mut self) {
        let _ = killpg(self.pid, Signal::SIGTERM);
        let grace_end = Instant::now() + TERM_GRACE;
        while Instant::now() < grace_end && self.try_wait().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.kill_group();
        let kill_end = Instant::now() + KILL_WAIT;
        while !self.reaped && Instant::now() < kill_end && self.try_wait().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for LocalProcess {
    fn drop(&mut self) {
        if !self.group_killed {
            let _ = killpg(self.pid, Signal::SIGKILL);
        }
        if !self.reaped
            && let Some(mut child) = self.child.take()
        {
            // Reap it off the async runtime so it does not linger as a zombie.
            let _ = std::thread::Builder::new()
                .name("pincer-bash-reap".to_string())
                .spawn(move || {
                    let _ = child.wait();
                });
        }
    }
}

/// Reads the PTY on its own thread (reads block) and passes the bytes on.
/// The thread ends when the PTY closes or the receiver is dropped.
fn spawn_reader(mut reader: Box<dyn Read + Send>) -> std::io::Result<mpsc::Receiver<Vec<u8>>> {
    let (sender, receiver) = mpsc::channel(64);
    std::thread::Builder::new()
        .name("pincer-bash-pty".to_string())
        .spawn(move || {
            let mut buffer = vec![0; 16 * 1024];
            loop {
                match reader.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => {
                        if sender.blocking_send(buffer[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        })?;
    Ok(receiver)
}

// ---------------------------------------------------------------------------
// The result

/// The text the model gets for a call that ended as `outcome`.
fn tool_output(outcome: &Outcome, rendered: &Rendered) -> ToolOutput {
    let shown = shown_text(rendered);
    let (text, is_error) = match outcome {
        Outcome::Exited {
            code: Some(0) | None,
            signal: None,
        } => (or_no_output(shown), false),
        Outcome::Exited {
            code: Some(code),
            signal: None,
        } => (
            format!("{}\n\nCommand exited with code {code}", or_no_output(shown)),
            true,
        ),
        Outcome::Exited {
            signal: Some(signal),
            ..
        } => (
            format!(
                "{}\n\nCommand was terminated by a signal ({signal})",
                or_no_output(shown)
            ),
            true,
        ),
        Outcome::TimedOut(seconds) => (
            join_message(
                &shown,
                &format!(
                    "Command timed out after {seconds} second{}",
                    if *seconds == 1 { "" } else { "s" }
                ),
            ),
            true,
        ),
        Outcome::Cancelled => (join_message(&shown, "Command aborted"), true),
    };
    let exit_code = match outcome {
        Outcome::Exited { code, .. } => *code,
        _ => None,
    };
    let details = json!({
        "exitCode": exit_code,
        "timedOut": matches!(outcome, Outcome::TimedOut(_)),
        "cancelled": matches!(outcome, Outcome::Cancelled),
        "truncated": rendered.truncated,
        "fullOutputPath": rendered.full_output_path.as_ref().map(|p| p.display().to_string()),
    });
    let output = if is_error {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    };
    ToolOutput { details, ..output }
}

/// The output with its truncation note, if any.
fn shown_text(rendered: &Rendered) -> String {
    match &rendered.note {
        Some(note) if rendered.output.is_empty() => note.clone(),
        Some(note) => format!("{}\n\n{note}", rendered.output),
        None => rendered.output.clone(),
    }
}

fn or_no_output(text: String) -> String {
    if text.is_empty() {
        "(no output)".to_string()
    } else {
        text
    }
}

/// `message` after the output, or alone when there was none.
fn join_message(shown: &str, message: &str) -> String {
    if shown.is_empty() {
        message.to_string()
    } else {
        format!("{shown}\n\n{message}")
    }
}

// ---------------------------------------------------------------------------
// Output: cleaning and keeping the tail

/// What the model is shown of a command's output.
#[derive(Debug, Default, PartialEq)]
struct Rendered {
    /// The kept lines, without trailing newlines.
    output: String,
    /// Says what was cut and where all of it is.
    note: Option<String>,
    truncated: bool,
    full_output_path: Option<PathBuf>,
}

/// A completed line kept in memory.
#[derive(Debug)]
struct Line {
    text: String,
    /// Its start went to the full-output file (the line was very long).
    partial: bool,
}

/// Where the full output goes once it is too long to show.
#[derive(Debug, Default)]
enum Spill {
    #[default]
    None,
    Open {
        path: PathBuf,
        file: BufWriter<File>,
    },
    Failed(String),
}

/// Cleaned output as a terminal would show it: the last lines in memory,
/// everything in a file once that is more than a result holds.
///
/// Invariant: while the spill file is open it holds every committed byte
/// (all completed lines and the spilled head of the current line), in order.
#[derive(Debug, Default)]
struct OutputBuffer {
    cleaner: Cleaner,
    /// The line being printed (after carriage returns and backspaces),
    /// without any head already moved to the file.
    line: String,
    line_partial: bool,
    /// A `\r` was printed: the next character starts the line over.
    pending_cr: bool,
    /// The last completed lines: at least those the result can show.
    lines: VecDeque<Line>,
    /// Bytes of `lines`, counting a newline after each.
    lines_bytes: usize,
    /// Lines completed so far, including those no longer in memory.
    completed: usize,
    spill: Spill,
    /// Bumped on every push, so progress is only sent when something changed.
    version: u64,
}

impl OutputBuffer {
    fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.version += 1;
        let mut cleaned = String::new();
        self.cleaner.feed(bytes, &mut cleaned);
        self.apply(&cleaned);
    }

    fn version(&self) -> u64 {
        self.version
    }

    fn apply(&mut self, cleaned: &str) {
        for c in cleaned.chars() {
            match c {
                '\n' => self.complete_line(),
                '\r' => self.pending_cr = true,
                '\u{8}' => {
                    if !self.pending_cr {
                        self.line.pop();
                    }
                }
                c => {
                    if self.pending_cr {
                        self.line.clear();
                        self.pending_cr = false;
                    }
                    self.line.push(c);
                    if self.line.len() > LINE_SPILL_BYTES {
                        self.spill_line_head();
                    }
                }
            }
        }
    }

    fn complete_line(&mut self) {
        self.pending_cr = false;
        let text = std::mem::take(&mut self.line);
        let partial = std::mem::take(&mut self.line_partial);
        self.write_spill(&text);
        self.write_spill("\n");
        self.completed += 1;
        self.lines_bytes += text.len() + 1;
        self.lines.push_back(Line { text, partial });
        self.trim();
    }

    /// Forgets lines the result can no longer show (after saving them).
    fn trim(&mut self) {
        while let Some(front) = self.lines.front() {
            let rest = self.lines_bytes - (front.text.len() + 1);
            if self.lines.len() <= MAX_LINES && rest <= MAX_BYTES {
                break;
            }
            self.open_spill();
            self.lines_bytes = rest;
            self.lines.pop_front();
        }
    }

    /// Moves all but the last `MAX_BYTES` of an overlong current line to the
    /// file.
    fn spill_line_head(&mut self) {
        self.open_spill();
        let cut = floor_char_boundary(&self.line, self.line.len() - MAX_BYTES);
        let head: String = self.line.drain(..cut).collect();
        self.write_spill(&head);
        self.line_partial = true;
    }

    /// Opens the full-output file and writes what is in memory (everything
    /// so far, since nothing is forgotten before the file exists).
    fn open_spill(&mut self) {
        if !matches!(self.spill, Spill::None) {
            return;
        }
        self.spill = match create_output_file() {
            Ok((path, file)) => Spill::Open {
                path,
                file: BufWriter::new(file),
            },
            Err(e) => Spill::Failed(e.to_string()),
        };
        let lines: Vec<String> = self
            .lines
            .iter()
            .map(|line| format!("{}\n", line.text))
            .collect();
        for line in lines {
            self.write_spill(&line);
        }
    }

    fn write_spill(&mut self, text: &str) {
        if let Spill::Open { file, .. } = &mut self.spill
            && let Err(e) = file.write_all(text.as_bytes())
        {
            self.spill = Spill::Failed(e.to_string());
        }
    }

    /// The last `max_bytes` or so of the output, for the live view.
    fn tail(&self, max_bytes: usize) -> String {
        let mut parts = vec![self.line.as_str()];
        let mut bytes = self.line.len();
        for line in self.lines.iter().rev() {
            if bytes >= max_bytes {
                break;
            }
            parts.push(&line.text);
            bytes += line.text.len() + 1;
        }
        parts.reverse();
        let text = parts.join("\n");
        let start = text.len().saturating_sub(max_bytes);
        let start = ceil_char_boundary(&text, start);
        text[start..].trim_end_matches('\n').to_string()
    }

    /// What the model is shown, saving the full output if it is cut.
    fn finish(mut self) -> Rendered {
        let mut tail_bytes = String::new();
        self.cleaner.finish(&mut tail_bytes);
        self.apply(&tail_bytes);

        let has_current = !self.line.is_empty() || self.line_partial;
        let total = self.completed + usize::from(has_current);
        let current = has_current.then_some((self.line.as_str(), self.line_partial));
        let candidates = self
            .lines
            .iter()
            .map(|line| (line.text.as_str(), line.partial))
            .chain(current)
            .rev();

        let mut shown: Vec<&str> = Vec::new();
        let mut bytes = 0;
        let mut byte_limited = false;
        let mut line_cut = false;
        for (text, partial) in candidates {
            if shown.len() == MAX_LINES {
                break;
            }
            if shown.is_empty() && (partial || text.len() > MAX_BYTES) {
                let start = ceil_char_boundary(text, text.len().saturating_sub(MAX_BYTES));
                shown.push(&text[start..]);
                line_cut = true;
                break;
            }
            if partial || bytes + text.len() > MAX_BYTES {
                byte_limited = true;
                break;
            }
            bytes += text.len() + 1;
            shown.push(text);
        }
        shown.reverse();
        let output = shown.join("\n").trim_end_matches('\n').to_string();
        let truncated = line_cut || shown.len() < total;
        let shown_count = shown.len();
        if !truncated {
            return Rendered {
                output,
                ..Rendered::default()
            };
        }

        self.open_spill();
        let line = std::mem::take(&mut self.line);
        self.write_spill(&line);
        let (where_, full_output_path) = match self.spill {
            Spill::Open { path, mut file } => match file.flush() {
                Ok(()) => (format!("Full output: {}", path.display()), Some(path)),
                Err(e) => (format!("The full output could not be saved: {e}"), None),
            },
            Spill::Failed(e) => (format!("The full output could not be saved: {e}"), None),
            Spill::None => (String::new(), None),
        };
        let note = if line_cut {
            format!("[Showing the last 50 KB of line {total}. {where_}]")
        } else {
            let first = total - shown_count + 1;
            let limit = if byte_limited { " (50 KB limit)" } else { "" };
            format!("[Showing lines {first}-{total} of {total}{limit}. {where_}]")
        };
        Rendered {
            output,
            note: Some(note),
            truncated,
            full_output_path,
        }
    }
}

/// A new file for a command's full output, readable only by this user.
fn create_output_file() -> std::io::Result<(PathBuf, File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::env::temp_dir().join(format!("pincer-bash-{}.log", uuid::Uuid::new_v4()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    Ok((path, file))
}

/// The largest char boundary of `s` at or before `index`.
fn floor_char_boundary(s: &str, index: usize) -> usize {
    let mut index = index.min(s.len());
    while !s.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The smallest char boundary of `s` at or after `index`.
fn ceil_char_boundary(s: &str, index: usize) -> usize {
    let mut index = index.min(s.len());
    while !s.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// Where the cleaner is inside an escape sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Esc,
    /// ESC followed by intermediate bytes (`ESC ( B`).
    EscIntermediate,
    /// Control sequence (`ESC [ … final`).
    Csi,
    /// A string (OSC, DCS, SOS, PM, APC) up to BEL or ST.
    String,
    /// ESC inside a string: `\` ends it.
    StringEsc,
}

/// Turns terminal output into text: decodes UTF-8 across chunk boundaries
/// and drops escape sequences and control characters, keeping `\n`, `\t`,
/// and `\r` and backspace for the line buffer to interpret.
#[derive(Debug, Default)]
struct Cleaner {
    escape: Escape,
    /// The start of a UTF-8 sequence cut off at the end of the last chunk.
    incomplete: Vec<u8>,
}

impl Cleaner {
    fn feed(&mut self, bytes: &[u8], out: &mut String) {
        let joined;
        let mut rest = if self.incomplete.is_empty() {
            bytes
        } else {
            let mut buffer = std::mem::take(&mut self.incomplete);
            buffer.extend_from_slice(bytes);
            joined = buffer;
            &joined[..]
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.chars(text, out);
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    self.chars(std::str::from_utf8(valid).unwrap_or_default(), out);
                    match e.error_len() {
                        Some(bad) => {
                            self.char('\u{fffd}', out);
                            rest = &after[bad..];
                        }
                        None => {
                            self.incomplete = after.to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Output ended: a cut-off UTF-8 sequence becomes a replacement character.
    fn finish(&mut self, out: &mut String) {
        if !self.incomplete.is_empty() {
            self.incomplete.clear();
            self.char('\u{fffd}', out);
        }
    }

    fn chars(&mut self, text: &str, out: &mut String) {
        for c in text.chars() {
            self.char(c, out);
        }
    }

    fn char(&mut self, c: char, out: &mut String) {
        match self.escape {
            Escape::None => match c {
                '\u{1b}' => self.escape = Escape::Esc,
                '\n' | '\t' | '\r' | '\u{8}' => out.push(c),
                c if c.is_control() => {}
                c => out.push(c),
            },
            Escape::Esc => {
                self.escape = match c {
                    '[' => Escape::Csi,
                    ']' | 'P' | 'X' | '^' | '_' => Escape::String,
                    ' '..='/' => Escape::EscIntermediate,
                    _ => Escape::None,
                }
            }
            Escape::EscIntermediate => {
                if !(' '..='/').contains(&c) {
                    self.escape = Escape::None;
                }
            }
            Escape::Csi => match c {
                // Parameters and intermediates.
                ' '..='?' => {}
                // The final byte.
                '@'..='~' => self.escape = Escape::None,
                // Malformed: drop the sequence, keep the character.
                c => {
                    self.escape = Escape::None;
                    self.char(c, out);
                }
            },
            Escape::String => match c {
                '\u{7}' | '\u{9c}' => self.escape = Escape::None,
                '\u{1b}' => self.escape = Escape::StringEsc,
                // An unterminated string must not swallow the rest.
                '\n' => {
                    self.escape = Escape::None;
                    out.push('\n');
                }
                _ => {}
            },
            Escape::StringEsc => {
                if c == '\\' {
                    self.escape = Escape::None;
                } else {
                    self.escape = Escape::Esc;
                    self.char(c, out);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Permission scopes: the commands in a command line

/// The prefix of every simple command in `command` ("cargo test", "rm"),
/// distinct, in order of appearance. Commands inside `$(…)`, backticks,
/// process substitutions and unquoted here-documents count too, so
/// `echo $(rm x)` needs "rm x" allowed as well as "echo".
pub fn command_prefixes(command: &str) -> Vec<String> {
    let chars: Vec<char> = command.chars().collect();
    let mut scan = Scan::new(&chars);
    scan.list(false);
    let mut found = scan.commands;
    found.sort_by_key(|(start, _)| *start);
    let mut prefixes: Vec<String> = Vec::new();
    for (_, words) in found {
        if let Some(prefix) = prefix_of(&words)
            && !prefixes.contains(&prefix)
        {
            prefixes.push(prefix);
        }
    }
    prefixes
}

/// Words that may start a command without being one.
const RESERVED_PREFIXES: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time",
    "esac", "coproc",
];
/// Words that start compound commands whose following words are not a
/// command (the commands inside are found on their own).
const NOT_COMMANDS: &[&str] = &["for", "select", "case", "function", "in"];

/// "program subcommand" of one simple command, or `None` if it runs nothing.
fn prefix_of(words: &[Word]) -> Option<String> {
    let mut words = words
        .iter()
        .skip_while(|w| w.is_assignment() || RESERVED_PREFIXES.contains(&w.raw.as_str()));
    let program = words.next()?;
    if NOT_COMMANDS.contains(&program.raw.as_str()) {
        return None;
    }
    let name = if program.expanded {
        program.raw.clone()
    } else {
        program.value.clone()
    };
    // Only tools known to have subcommands get one: "always allow `cargo
    // test`" should not allow `cargo publish`, but "always allow `echo`"
    // means every echo, not just `echo hello`. A path ("./build.sh") names a
    // script, never such a tool.
    let bare = !program.raw.contains('/') && !program.expanded;
    let has_subcommands = bare && SUBCOMMAND_TOOLS.contains(&name.as_str());
    match words.next() {
        Some(next) if has_subcommands && is_subcommand(&next.raw) => {
            Some(format!("{name} {}", next.raw))
        }
        _ => Some(name),
    }
}

/// Programs whose second word picks what they do.
const SUBCOMMAND_TOOLS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "bun",
    "bundle",
    "cargo",
    "composer",
    "conda",
    "deno",
    "docker",
    "dotnet",
    "gem",
    "gh",
    "git",
    "go",
    "gradle",
    "helm",
    "kubectl",
    "make",
    "mix",
    "mvn",
    "nix",
    "npm",
    "npx",
    "pip",
    "pip3",
    "pnpm",
    "podman",
    "poetry",
    "rustup",
    "swift",
    "systemctl",
    "terraform",
    "uv",
    "yarn",
    // Wrappers: what they run matters more than that they run.
    "doas",
    "exec",
    "nohup",
    "sudo",
    "xargs",
];

fn is_subcommand(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with('-')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A shell word as written (`raw`) and with quotes removed (`value`).
#[derive(Clone, Debug, Default)]
struct Word {
    raw: String,
    value: String,
    /// Holds a parameter, command or arithmetic expansion.
    expanded: bool,
}

impl Word {
    /// `NAME=value` or `NAME+=value`.
    fn is_assignment(&self) -> bool {
        let Some(eq) = self.raw.find('=') else {
            return false;
        };
        let name = self.raw[..eq].strip_suffix('+').unwrap_or(&self.raw[..eq]);
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    }
}

/// A here-document whose body comes after the current line.
#[derive(Debug)]
struct Heredoc {
    delimiter: String,
    strip_tabs: bool,
    /// Unquoted delimiter: the body is expanded, so `$(…)` in it runs.
    expands: bool,
}

/// The simple command being read.
#[derive(Debug, Default)]
struct Current {
    words: Vec<Word>,
    /// Where the first word started, for ordering.
    start: Option<usize>,
    word: Option<(usize, Word)>,
    /// The next word is a redirection target, not an argument.
    redirect_target: bool,
    /// The next word is a here-document delimiter (`<<-` strips tabs).
    heredoc: Option<bool>,
}

impl Current {
    fn word_mut(&mut self, at: usize) -> &mut Word {
        &mut self.word.get_or_insert_with(|| (at, Word::default())).1
    }
}

/// A hand-written scanner for the parts of bash syntax that decide where
/// commands start: quotes, escapes, operators, substitutions, comments and
/// here-documents. It does not need to be a full parser: every mistake it
/// can make splits a command in two, which only asks for more permission.
struct Scan<'a> {
    chars: &'a [char],
    pos: usize,
    /// Finished simple commands with where they started.
    commands: Vec<(usize, Vec<Word>)>,
    heredocs: Vec<Heredoc>,
}

impl<'a> Scan<'a> {
    fn new(chars: &'a [char]) -> Self {
        Self {
            chars,
            pos: 0,
            commands: Vec::new(),
            heredocs: Vec::new(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Reads a command list up to the end, or up to the `)` that closes a
    /// substitution when `in_parens`.
    fn list(&mut self, in_parens: bool) {
        let mut current = Current::default();
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => {
                    self.end_word(&mut current);
                    self.pos += 1;
                }
                '\n' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                    self.heredoc_bodies();
                }
                ';' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                }
                '&' => {
                    if self.peek_at(1) == Some('>') {
                        // `&>file`, `&>>file`
                        self.end_word(&mut current);
                        self.pos += 2;
                        if self.peek() == Some('>') {
                            self.pos += 1;
                        }
                        current.redirect_target = true;
                    } else {
                        self.end_command(&mut current);
                        self.pos += 1;
                        if self.peek() == Some('&') {
                            self.pos += 1;
                        }
                    }
                }
                '|' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                    if matches!(self.peek(), Some('|' | '&')) {
                        self.pos += 1;
                    }
                }
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    // Process substitution: a command inside an argument.
                    current.word_mut(self.pos).expanded = true;
                    let start = self.pos;
                    self.pos += 2;
                    self.list(true);
                    self.append_raw(&mut current, start);
                }
                '<' | '>' => self.redirection(&mut current),
                '(' => {
                    let array = current
                        .word
                        .as_ref()
                        .is_some_and(|(_, w)| w.raw.ends_with('=') && w.is_assignment());
                    if array {
                        let start = self.pos;
                        self.skip_parens();
                        self.append_raw(&mut current, start);
                    } else if current.word.is_none()
                        && current.words.is_empty()
                        && self.peek_at(1) == Some('(')
                    {
                        // `(( arithmetic ))`
                        self.pos += 2;
                        self.arithmetic();
                    } else {
                        self.end_command(&mut current);
                        self.pos += 1;
                        depth += 1;
                    }
                }
                ')' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                    if depth == 0 && in_parens {
                        return;
                    }
                    depth = depth.saturating_sub(1);
                }
                '#' if current.word.is_none() => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => self.word_part(&mut current),
            }
        }
        self.end_command(&mut current);
    }

    /// One piece of a word: a quoted string, an escape, an expansion or a
    /// plain character.
    fn word_part(&mut self, current: &mut Current) {
        let start = self.pos;
        let Some(c) = self.peek() else {
            return;
        };
        match c {
            '\'' => {
                self.pos += 1;
                let mut text = String::new();
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    if c == '\'' {
                        break;
                    }
                    text.push(c);
                }
                current.word_mut(start).value.push_str(&text);
            }
            '"' => {
                self.pos += 1;
                let (text, expanded) = self.double_quoted();
                let word = current.word_mut(start);
                word.value.push_str(&text);
                word.expanded |= expanded;
            }
            '\\' => {
                self.pos += 1;
                match self.peek() {
                    // Line continuation.
                    Some('\n') => self.pos += 1,
                    Some(c) => {
                        self.pos += 1;
                        current.word_mut(start).value.push(c);
                    }
                    None => {}
                }
            }
            '$' => {
                let expanded = self.dollar();
                let word = current.word_mut(start);
                word.expanded |= expanded;
                if !expanded {
                    word.value.push('$');
                }
            }
            '`' => {
                self.pos += 1;
                self.backticks();
                current.word_mut(start).expanded = true;
            }
            c => {
                self.pos += 1;
                current.word_mut(start).value.push(c);
            }
        }
        self.append_raw(current, start);
    }

    /// Adds the source from `start` to here to the current word's raw text.
    fn append_raw(&self, current: &mut Current, start: usize) {
        let raw: String = self.chars[start..self.pos].iter().collect();
        current.word_mut(start).raw.push_str(&raw);
    }

    /// The rest of a `"…"` string: its text and whether it expands anything.
    fn double_quoted(&mut self) -> (String, bool) {
        let mut text = String::new();
        let mut expanded = false;
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.pos += 1;
                    break;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(c @ ('$' | '`' | '"' | '\\')) => {
                            self.pos += 1;
                            text.push(c);
                        }
                        _ => text.push('\\'),
                    }
                }
                '$' => {
                    if self.dollar() {
                        expanded = true;
                    } else {
                        text.push('$');
                    }
                }
                '`' => {
                    self.pos += 1;
                    self.backticks();
                    expanded = true;
                }
                c => {
                    self.pos += 1;
                    text.push(c);
                }
            }
        }
        (text, expanded)
    }

    /// At a `$`: reads the expansion it starts, collecting commands inside.
    /// Returns false for a lone `$` (which is then literal).
    fn dollar(&mut self) -> bool {
        self.pos += 1;
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                self.pos += 2;
                self.arithmetic();
            }
            Some('(') => {
                self.pos += 1;
                self.list(true);
            }
            Some('{') => {
                self.pos += 1;
                self.braced();
            }
            Some('\'') => {
                // ANSI-C quoting: `$'…'` with backslash escapes.
                self.pos += 1;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    match c {
                        '\\' => self.pos += 1,
                        '\'' => break,
                        _ => {}
                    }
                }
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.pos += 1;
                    }
                } else {
                    self.pos += 1;
                }
            }
            _ => return false,
        }
        true
    }

    /// The rest of `$((…))` or `((…))`: no commands, except substitutions.
    fn arithmetic(&mut self) {
        let mut depth = 2usize;
        while let Some(c) = self.peek() {
            match c {
                '(' => {
                    depth += 1;
                    self.pos += 1;
                }
                ')' => {
                    depth -= 1;
                    self.pos += 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => self.skip_part(),
            }
        }
    }

    /// The rest of `${…}`, collecting commands in substitutions inside.
    fn braced(&mut self) {
        while let Some(c) = self.peek() {
            if c == '}' {
                self.pos += 1;
                return;
            }
            self.skip_part();
        }
    }

    /// The rest of an array `(…)`, as part of the current word.
    fn skip_parens(&mut self) {
        self.pos += 1;
        let mut depth = 1usize;
        while let Some(c) = self.peek() {
            match c {
                '(' => {
                    depth += 1;
                    self.pos += 1;
                }
                ')' => {
                    self.pos += 1;
                    depth -= 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => self.skip_part(),
            }
        }
    }

    /// Steps over one quoted string, escape, expansion or character inside
    /// something that is not a command, still collecting substitutions.
    fn skip_part(&mut self) {
        match self.peek() {
            Some('\\') => self.pos += 2,
            Some('\'') => {
                self.pos += 1;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    if c == '\'' {
                        break;
                    }
                }
            }
            Some('"') => {
                self.pos += 1;
                self.double_quoted();
            }
            Some('$') => {
                self.dollar();
            }
            Some('`') => {
                self.pos += 1;
                self.backticks();
            }
            Some(_) => self.pos += 1,
            None => {}
        }
        self.pos = self.pos.min(self.chars.len());
    }

    /// The rest of a backtick substitution: its text, unescaped, is scanned
    /// as a command list of its own.
    fn backticks(&mut self) {
        let start = self.pos;
        let mut inner = Vec::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '`' => break,
                '\\' => match self.peek() {
                    Some(next @ ('`' | '\\' | '$')) => {
                        self.pos += 1;
                        inner.push(next);
                    }
                    _ => inner.push('\\'),
                },
                c => inner.push(c),
            }
        }
        let mut scan = Scan::new(&inner);
        scan.list(false);
        self.commands.extend(
            scan.commands
                .into_iter()
                .map(|(at, words)| (start + at, words)),
        );
    }

    /// At `<` or `>` (not a process substitution): reads the operator; the
    /// next word is its target.
    fn redirection(&mut self, current: &mut Current) {
        // `2>` names a file descriptor, not an argument.
        let fd = current
            .word
            .as_ref()
            .is_some_and(|(_, w)| !w.raw.is_empty() && w.raw.chars().all(|c| c.is_ascii_digit()));
        if fd {
            current.word = None;
        } else {
            self.end_word(current);
        }
        let first = self.peek();
        self.pos += 1;
        if first == Some('<') && self.peek() == Some('<') {
            self.pos += 1;
            if self.peek() == Some('<') {
                // Here-string: `<<< word`.
                self.pos += 1;
                current.redirect_target = true;
            } else {
                let strip_tabs = self.peek() == Some('-');
                if strip_tabs {
                    self.pos += 1;
                }
                current.heredoc = Some(strip_tabs);
            }
            return;
        }
        if matches!(self.peek(), Some('>' | '&' | '|')) {
            self.pos += 1;
        }
        current.redirect_target = true;
    }

    fn end_word(&mut self, current: &mut Current) {
        let Some((start, word)) = current.word.take() else {
            return;
        };
        if let Some(strip_tabs) = current.heredoc.take() {
            self.heredocs.push(Heredoc {
                expands: !word.raw.contains(['\'', '"', '\\']),
                delimiter: word.value,
                strip_tabs,
            });
        } else if current.redirect_target {
            current.redirect_target = false;
        } else {
            current.start.get_or_insert(start);
            current.words.push(word);
        }
    }

    fn end_command(&mut self, current: &mut Current) {
        self.end_word(current);
        let finished = std::mem::take(current);
        if let (Some(start), false) = (finished.start, finished.words.is_empty()) {
            self.commands.push((start, finished.words));
        }
    }

    /// After a newline: skips the bodies of pending here-documents,
    /// collecting substitutions in those that expand.
    fn heredoc_bodies(&mut self) {
        for heredoc in std::mem::take(&mut self.heredocs) {
            while self.pos < self.chars.len() {
                let line_start = self.pos;
                let line_end = self.chars[line_start..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |n| line_start + n);
                let line: String = self.chars[line_start..line_end].iter().collect();
                let line = if heredoc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if line == heredoc.delimiter {
                    self.pos = (line_end + 1).min(self.chars.len());
                    break;
                }
                if heredoc.expands {
                    while self.pos < line_end {
                        match self.peek() {
                            Some('$' | '`' | '\\') => self.skip_part(),
                            _ => self.pos += 1,
                        }
                    }
                }
                // A substitution may have run past the line; go on from there.
                self.pos = self.pos.max(line_end + 1).min(self.chars.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::TerminalOutput;
    use pretty_assertions::assert_eq;
    use std::sync::Mutex;

    static TOOL: BashTool = BashTool { _private: () };

    struct Fixture {
        dir: tempfile::TempDir,
        ctx: ToolContext,
        progress: Arc<Mutex<Vec<Vec<Display>>>>,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let mut ctx = ToolContext::local(dir.path().to_path_buf());
            let progress = Arc::new(Mutex::new(Vec::new()));
            let sink = Arc::clone(&progress);
            ctx.progress = Arc::new(move |update| sink.lock().unwrap().push(update));
            Self { dir, ctx, progress }
        }

        async fn run(&self, args: serde_json::Value) -> ToolOutput {
            // A hang must fail the test, not the whole run.
            tokio::time::timeout(Duration::from_secs(60), TOOL.execute(args, &self.ctx))
                .await
                .expect("the bash tool hung")
        }

        fn progress(&self) -> Vec<Vec<Display>> {
            self.progress.lock().unwrap().clone()
        }
    }

    fn details(exit_code: Option<u32>) -> serde_json::Value {
        json!({
            "exitCode": exit_code,
            "timedOut": false,
            "cancelled": false,
            "truncated": false,
            "fullOutputPath": null,
        })
    }

    /// A local run's result: `display` repeats the text.
    fn local(text: &str, is_error: bool, details: serde_json::Value) -> ToolOutput {
        let base = if is_error {
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        };
        ToolOutput {
            details,
            display: vec![Display::Text(text.to_string())],
            ..base
        }
    }

    /// A number unique to this test process, so concurrent test runs on the
    /// same machine cannot see each other's processes.
    fn marker(test: u32) -> String {
        format!("3{test}.{}", std::process::id())
    }

    /// Processes whose command line contains `marker`.
    fn processes_with(marker: &str) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if !name.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if cmdline.contains(marker) {
                    found.push(format!("{name}: {cmdline}"));
                }
            }
        }
        found
    }

    /// Waits (with a deadline) until no process mentions `marker`.
    async fn assert_no_process_with(marker: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found = processes_with(marker);
            if found.is_empty() || std::time::Instant::now() > deadline {
                assert_eq!(found, Vec::<String>::new(), "processes left behind");
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn echo_prints_its_text() {
        let f = Fixture::new();
        assert_eq!(
            f.run(json!({"command": "echo hello"})).await,
            local("hello", false, details(Some(0)))
        );
    }

    #[tokio::test]
    async fn runs_in_the_working_directory() {
        let f = Fixture::new();
        let expected = f.dir.path().display().to_string();
        assert_eq!(
            f.run(json!({"command": "pwd"})).await,
            local(&expected, false, details(Some(0)))
        );
    }

    #[tokio::test]
    async fn missing_working_directory_is_an_error() {
        let f = Fixture::new();
        let mut ctx = f.ctx.clone();
        ctx.cwd = f.dir.path().join("gone");
        assert_eq!(
            TOOL.execute(json!({"command": "touch marker"}), &ctx).await,
            ToolOutput::error(format!(
                "The working directory {} does not exist or is not a directory, so the \
                 command was not run.",
                ctx.cwd.display()
            ))
        );
    }

    #[tokio::test]
    async fn non_zero_exit_is_an_error_with_the_code() {
        let f = Fixture::new();
        assert_eq!(
            f.run(json!({"command": "echo oops; exit 3"})).await,
            local("oops\n\nCommand exited with code 3", true, details(Some(3)))
        );
        assert_eq!(
            f.run(json!({"command": "false"})).await,
            local(
                "(no output)\n\nCommand exited with code 1",
                true,
                details(Some(1))
            )
        );
    }

    #[tokio::test]
    async fn death_by_signal_is_an_error() {
        let f = Fixture::new();
        assert_eq!(
            f.run(json!({"command": "echo dying; kill -TERM $$"})).await,
            local(
                "dying\n\nCommand was terminated by a signal (Terminated)",
                true,
                details(None)
            )
        );
    }

    #[tokio::test]
    async fn empty_output_says_so() {
        let f = Fixture::new();
        assert_eq!(
            f.run(json!({"command": "true"})).await,
            local("(no output)", false, details(Some(0)))
        );
    }

    #[tokio::test]
    async fn stderr_is_merged_in_order() {
        let f = Fixture::new();
        assert_eq!(
            f.run(json!({"command": "echo out; echo err >&2; echo out again"}))
                .await,
            local("out\nerr\nout again", false, details(Some(0)))
        );
    }

    #[tokio::test]
    async fn stdin_is_empty() {
        let f = Fixture::new();
        assert_eq!(
            f.run(json!({"command": "cat; echo done"})).await,
            local("done", false, details(Some(0)))
        );
    }

    #[tokio::test]
    async fn ansi_escapes_and_redraws_are_removed() {
        let f = Fixture::new();
        assert_eq!(
            f.run(json!({
                "command": r"printf '\033[31mred\033[0m plain\n'; printf '10%%\r50%%\r100%%\n'"
            }))
            .await,
            local("red plain\n100%", false, details(Some(0)))
        );
    }

    #[tokio::test]
    async fn long_output_keeps_the_last_2000_lines_and_saves_the_rest() {
        let f = Fixture::new();
        let output = f.run(json!({"command": "seq 1 3000"})).await;
        let path = output.details["fullOutputPath"]
            .as_str()
            .expect("a full output path")
            .to_string();
        let kept: Vec<String> = (1001..=3000).map(|i| i.to_string()).collect();
        let text = format!(
            "{}\n\n[Showing lines 1001-3000 of 3000. Full output: {path}]",
            kept.join("\n")
        );
        assert_eq!(
            output,
            local(
                &text,
                false,
                json!({
                    "exitCode": 0,
                    "timedOut": false,
                    "cancelled": false,
                    "truncated": true,
                    "fullOutputPath": path,
                })
            )
        );
        let all: String = (1..=3000).map(|i| format!("{i}\n")).collect();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), all);
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn timeout_kills_the_command() {
        let f = Fixture::new();
        let marker = marker(1);
        let started = std::time::Instant::now();
        let output = f
            .run(json!({"command": format!("echo before; sleep {marker}"), "timeout": 1}))
            .await;
        assert!(started.elapsed() < Duration::from_secs(20));
        assert_eq!(
            output,
            local(
                "before\n\nCommand timed out after 1 second",
                true,
                json!({
                    "exitCode": null,
                    "timedOut": true,
                    "cancelled": false,
                    "truncated": false,
                    "fullOutputPath": null,
                })
            )
        );
        assert_no_process_with(&marker).await;
    }

    #[tokio::test]
    async fn cancel_kills_the_command() {
        let mut f = Fixture::new();
        let marker = marker(2);
        // Cancel as soon as the command has visibly started.
        let cancel = f.ctx.cancel.clone();
        f.ctx.progress = Arc::new(move |update| {
            if update == vec![Display::Text("started".to_string())] {
                cancel.cancel();
            }
        });
        let output = f
            .run(json!({"command": format!("echo started; sleep {marker}")}))
            .await;
        assert_eq!(
            output,
            local(
                "started\n\nCommand aborted",
                true,
                json!({
                    "exitCode": null,
                    "timedOut": false,
                    "cancelled": true,
                    "truncated": false,
                    "fullOutputPath": null,
                })
            )
        );
        assert_no_process_with(&marker).await;
    }

    #[tokio::test]
    async fn already_cancelled_runs_nothing() {
        let f = Fixture::new();
        f.ctx.cancel.cancel();
        assert_eq!(
            f.run(json!({"command": "touch ran"})).await,
            ToolOutput::error("Command aborted")
        );
        assert!(!f.dir.path().join("ran").exists());
    }

    #[tokio::test]
    async fn dropping_the_call_kills_the_command() {
        let f = Fixture::new();
        let marker = marker(3);
        let args = json!({"command": format!("sleep {marker}")});
        // Run it until the process exists, then drop the future.
        let mut call = TOOL.execute(args, &f.ctx);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while processes_with(&marker).is_empty() {
            assert!(std::time::Instant::now() < deadline, "sleep never started");
            let _ = tokio::time::timeout(Duration::from_millis(20), call.as_mut()).await;
        }
        drop(call);
        assert_no_process_with(&marker).await;
    }

    #[tokio::test]
    async fn background_processes_do_not_hang_the_call_and_are_killed() {
        let f = Fixture::new();
        let plain = marker(4);
        let ignoring_hup = marker(5);
        let command = format!("sleep {plain} & (trap '' HUP; sleep {ignoring_hup}) & echo started");
        let started = std::time::Instant::now();
        assert_eq!(
            f.run(json!({"command": command})).await,
            local("started", false, details(Some(0)))
        );
        assert!(started.elapsed() < Duration::from_secs(20));
        assert_no_process_with(&plain).await;
        assert_no_process_with(&ignoring_hup).await;
    }

    #[tokio::test]
    async fn progress_shows_output_while_it_arrives() {
        let f = Fixture::new();
        let output = f
            .run(json!({"command": "for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done"}))
            .await;
        assert_eq!(output, local("1\n2\n3\n4\n5\n6", false, details(Some(0))));
        let updates = f.progress();
        assert!(updates.len() >= 2, "too few updates: {updates:?}");
        let mut texts = Vec::new();
        for update in updates {
            match update.as_slice() {
                [Display::Text(text)] => texts.push(text.clone()),
                other => panic!("unexpected update {other:?}"),
            }
        }
        for text in &texts {
            assert!("1\n2\n3\n4\n5\n6".starts_with(text.as_str()), "{text:?}");
        }
        assert_ne!(texts.first(), texts.last());
    }

    // --- the editor's terminal

    #[derive(Clone, Debug, PartialEq)]
    enum Call {
        Create(TerminalCommand),
        Output(String),
        Wait(String),
        Kill(String),
        Release(String),
    }

    /// An editor whose terminal prints `output` and exits with `exit`
    /// (`None`: runs until killed).
    struct FakeTerminals {
        calls: Mutex<Vec<Call>>,
        output: TerminalOutput,
        exit: Option<TerminalExit>,
    }

    impl FakeTerminals {
        fn new(output: &str, exit: Option<TerminalExit>) -> Arc<Self> {
            Arc::new(Self {
                calls: Mutex::new(Vec::new()),
                output: TerminalOutput {
                    output: output.to_string(),
                    truncated: false,
                    exit: None,
                },
                exit,
            })
        }

        fn record(&self, call: Call) {
            self.calls.lock().unwrap().push(call);
        }

        fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Terminals for FakeTerminals {
        fn create(&self, command: TerminalCommand) -> BoxFuture<'_, std::io::Result<String>> {
            self.record(Call::Create(command));
            Box::pin(async { Ok("term-1".to_string()) })
        }

        fn output<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<TerminalOutput>> {
            self.record(Call::Output(id.to_string()));
            Box::pin(async { Ok(self.output.clone()) })
        }

        fn wait_for_exit<'a>(
            &'a self,
            id: &'a str,
        ) -> BoxFuture<'a, std::io::Result<TerminalExit>> {
            self.record(Call::Wait(id.to_string()));
            Box::pin(async {
                match &self.exit {
                    Some(exit) => Ok(exit.clone()),
                    None => std::future::pending().await,
                }
            })
        }

        fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<()>> {
            self.record(Call::Kill(id.to_string()));
            Box::pin(async { Ok(()) })
        }

        fn release<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<()>> {
            self.record(Call::Release(id.to_string()));
            Box::pin(async { Ok(()) })
        }
    }

    fn exited(code: u32) -> Option<TerminalExit> {
        Some(TerminalExit {
            exit_code: Some(code),
            signal: None,
        })
    }

    fn in_terminal(text: &str, is_error: bool, details: serde_json::Value) -> ToolOutput {
        let base = if is_error {
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        };
        ToolOutput {
            details,
            display: vec![Display::Terminal("term-1".to_string())],
            ..base
        }
    }

    #[tokio::test]
    async fn editor_terminal_runs_the_command_and_is_released() {
        let mut f = Fixture::new();
        let terminals = FakeTerminals::new("\u{1b}[1mhello\u{1b}[0m\r\nworld\r\n", exited(0));
        f.ctx.terminals = Some(terminals.clone());
        assert_eq!(
            f.run(json!({"command": "echo hello; echo world"})).await,
            in_terminal("hello\nworld", false, details(Some(0)))
        );
        assert_eq!(
            terminals.calls(),
            vec![
                Call::Create(TerminalCommand {
                    command: "bash".to_string(),
                    args: vec!["-c".to_string(), "echo hello; echo world".to_string()],
                    cwd: f.dir.path().to_path_buf(),
                    env: Vec::new(),
                    output_byte_limit: Some(TERMINAL_OUTPUT_LIMIT),
                }),
                Call::Wait("term-1".to_string()),
                Call::Output("term-1".to_string()),
                Call::Release("term-1".to_string()),
            ]
        );
        assert_eq!(
            f.progress(),
            vec![vec![Display::Terminal("term-1".to_string())]]
        );
    }

    #[tokio::test]
    async fn editor_terminal_non_zero_exit_is_an_error() {
        let mut f = Fixture::new();
        let terminals = FakeTerminals::new("", exited(2));
        f.ctx.terminals = Some(terminals.clone());
        assert_eq!(
            f.run(json!({"command": "false"})).await,
            in_terminal(
                "(no output)\n\nCommand exited with code 2",
                true,
                details(Some(2))
            )
        );
    }

    #[tokio::test]
    async fn editor_terminal_is_killed_on_timeout() {
        let mut f = Fixture::new();
        let terminals = FakeTerminals::new("partial\n", None);
        f.ctx.terminals = Some(terminals.clone());
        assert_eq!(
            f.run(json!({"command": "sleep 100", "timeout": 1})).await,
            in_terminal(
                "partial\n\nCommand timed out after 1 second",
                true,
                json!({
                    "exitCode": null,
                    "timedOut": true,
                    "cancelled": false,
                    "truncated": false,
                    "fullOutputPath": null,
                })
            )
        );
        let calls: Vec<Call> = terminals.calls().into_iter().skip(1).collect();
        assert_eq!(
            calls,
            vec![
                Call::Wait("term-1".to_string()),
                Call::Kill("term-1".to_string()),
                Call::Output("term-1".to_string()),
                Call::Release("term-1".to_string()),
            ]
        );
    }

    #[tokio::test]
    async fn editor_terminal_is_killed_on_cancel() {
        let mut f = Fixture::new();
        let terminals = FakeTerminals::new("", None);
        f.ctx.terminals = Some(terminals.clone());
        let cancel = f.ctx.cancel.clone();
        f.ctx.progress = Arc::new(move |_| cancel.cancel());
        let output = f.run(json!({"command": "sleep 100"})).await;
        assert_eq!(
            output,
            in_terminal(
                "Command aborted",
                true,
                json!({
                    "exitCode": null,
                    "timedOut": false,
                    "cancelled": true,
                    "truncated": false,
                    "fullOutputPath": null,
                })
            )
        );
        let calls: Vec<Call> = terminals.calls().into_iter().skip(1).collect();
        assert_eq!(
            calls,
            vec![
                Call::Wait("term-1".to_string()),
                Call::Kill("term-1".to_string()),
                Call::Output("term-1".to_string()),
                Call::Release("term-1".to_string()),
            ]
        );
    }

    #[tokio::test]
    async fn editor_terminal_exit_and_truncation_can_come_with_the_output() {
        let mut f = Fixture::new();
        let terminals = Arc::new(FakeTerminals {
            calls: Mutex::new(Vec::new()),
            output: TerminalOutput {
                output: "last lines\n".to_string(),
                truncated: true,
                exit: exited(4),
            },
            exit: Some(TerminalExit::default()),
        });
        f.ctx.terminals = Some(terminals.clone());
        assert_eq!(
            f.run(json!({"command": "make"})).await,
            in_terminal(
                "last lines\n\n[Earlier output was dropped by the editor's terminal.]\n\n\
                 Command exited with code 4",
                true,
                json!({
                    "exitCode": 4,
                    "timedOut": false,
                    "cancelled": false,
                    "truncated": true,
                    "fullOutputPath": null,
                })
            )
        );
    }

    #[tokio::test]
    async fn dropping_the_call_kills_and_releases_the_editor_terminal() {
        let mut f = Fixture::new();
        let terminals = FakeTerminals::new("", None);
        f.ctx.terminals = Some(terminals.clone());
        let mut call = TOOL.execute(json!({"command": "sleep 100"}), &f.ctx);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !terminals
            .calls()
            .contains(&Call::Wait("term-1".to_string()))
        {
            assert!(std::time::Instant::now() < deadline, "never waited");
            let _ = tokio::time::timeout(Duration::from_millis(10), call.as_mut()).await;
        }
        drop(call);
        let expected = vec![
            Call::Wait("term-1".to_string()),
            Call::Kill("term-1".to_string()),
            Call::Release("term-1".to_string()),
        ];
        loop {
            let calls: Vec<Call> = terminals.calls().into_iter().skip(1).collect();
            if calls == expected || std::time::Instant::now() > deadline {
                assert_eq!(calls, expected);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    // --- output buffer

    fn render(chunks: &[&[u8]]) -> Rendered {
        let mut buffer = OutputBuffer::default();
        for chunk in chunks {
            buffer.push(chunk);
        }
        buffer.finish()
    }

    fn plain(output: &str) -> Rendered {
        Rendered {
            output: output.to_string(),
            ..Rendered::default()
        }
    }

    #[test]
    fn cleaning_is_the_same_however_the_bytes_are_split() {
        let input = "caf\u{e9} \u{1b}[1;31mbold\u{1b}[0m\r\n\u{1b}]0;title\u{7}tab\there\r\n\
                     \u{1b}(Bx\u{1b}P1;2|data\u{1b}\\y\u{7}\u{0}z\r\n50%\r100%\r\n\
                     ab\u{8}c\r\n\u{1b}[?25l\u{1b}[2Kdone"
            .as_bytes();
        let whole = render(&[input]);
        assert_eq!(
            whole,
            plain("caf\u{e9} bold\ntab\there\nxyz\n100%\nac\ndone")
        );
        for split in 1..input.len() {
            let (a, b) = input.split_at(split);
            assert_eq!(render(&[a, b]), whole, "split at byte {split}");
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(
            render(&[b"a\xffb\n", b"\xe2\x82"]),
            plain("a\u{fffd}b\n\u{fffd}")
        );
    }

    #[test]
    fn byte_limit_cuts_at_line_boundaries() {
        // 1,000 lines of 100 bytes (with the newline): about 101 KB.
        let line = "x".repeat(99);
        let text: String = (0..1000).map(|_| format!("{line}\n")).collect();
        let rendered = render(&[text.as_bytes()]);
        let path = rendered.full_output_path.clone().expect("saved");
        // 512 lines of 100 bytes fit in 51,200 bytes (the last without its newline).
        let kept = vec![line.as_str(); 512].join("\n");
        assert_eq!(
            rendered,
            Rendered {
                output: kept,
                note: Some(format!(
                    "[Showing lines 489-1000 of 1000 (50 KB limit). Full output: {}]",
                    path.display()
                )),
                truncated: true,
                full_output_path: Some(path.clone()),
            }
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_single_long_line_keeps_its_tail() {
        // Long enough to be spilled to the file several times over.
        let text: String = (0..50_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let text = format!("first\n{}", text.repeat(7));
        let chunks: Vec<&[u8]> = text.as_bytes().chunks(4096).collect();
        let rendered = render(&chunks);
        let path = rendered.full_output_path.clone().expect("saved");
        assert_eq!(
            rendered,
            Rendered {
                output: text[text.len() - MAX_BYTES..].to_string(),
                note: Some(format!(
                    "[Showing the last 50 KB of line 2. Full output: {}]",
                    path.display()
                )),
                truncated: true,
                full_output_path: Some(path.clone()),
            }
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn exactly_the_limits_is_not_truncated() {
        let text: String = (1..=MAX_LINES).map(|i| format!("{i}\n")).collect();
        assert_eq!(render(&[text.as_bytes()]), plain(text.trim_end()));
        let line = "y".repeat(MAX_BYTES);
        assert_eq!(render(&[line.as_bytes(), b"\n"]), plain(&line));
    }

    #[test]
    fn progress_tail_is_the_end_of_the_output() {
        let mut buffer = OutputBuffer::default();
        buffer.push(b"one\r\ntwo\r\nthr");
        assert_eq!(buffer.tail(100), "one\ntwo\nthr");
        assert_eq!(buffer.tail(5), "o\nthr");
    }

    // --- describe, schema

    #[test]
    fn title_is_the_first_line_of_the_command() {
        let title_of = |command: &str| {
            TOOL.describe(&json!({"command": command}), Path::new("/"))
                .title
        };
        assert_eq!(title_of("  cargo test --all  "), "cargo test --all");
        assert_eq!(title_of("cd src\nls -la"), "cd src …");
        let long = "x".repeat(200);
        assert_eq!(title_of(&long), format!("{}…", "x".repeat(119)));
        assert_eq!(
            TOOL.describe(&json!({"command": "ls"}), Path::new("/")),
            CallInfo {
                title: "ls".to_string(),
                kind: ToolKind::Execute,
                locations: Vec::new(),
            }
        );
        assert_eq!(TOOL.describe(&json!({}), Path::new("/")).title, "bash");
    }

    #[test]
    fn schema_has_command_and_timeout() {
        assert_eq!(
            TOOL.parameters(),
            json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The shell command to run."
                    },
                    "timeout": {
                        "type": ["integer", "null"],
                        "format": "uint64",
                        "minimum": 0,
                        "description": "Seconds before the command is killed; default none."
                    }
                },
                "required": ["command"]
            })
        );
    }

    // --- permission scopes

    fn scopes(command: &str) -> Vec<String> {
        TOOL.permission_scopes(&json!({ "command": command }))
    }

    #[test]
    fn scopes_are_program_and_subcommand() {
        assert_eq!(scopes("cargo test --all"), ["cargo test"]);
        assert_eq!(scopes("git status"), ["git status"]);
        assert_eq!(scopes("rm -rf /"), ["rm"]);
        assert_eq!(scopes("ls"), ["ls"]);
        assert_eq!(scopes("./script.sh x"), ["./script.sh"]);
        assert_eq!(scopes("python3 tool.py --fix"), ["python3"]);
        assert_eq!(scopes("echo hello world"), ["echo"]);
        assert_eq!(scopes("git \"status\""), ["git"]);
        assert_eq!(scopes("  npm   run build "), ["npm run"]);
    }

    #[test]
    fn scopes_split_on_operators() {
        assert_eq!(
            scopes("cargo build && cargo test || echo failed; ls"),
            ["cargo build", "cargo test", "echo", "ls"]
        );
        assert_eq!(
            scopes("cat a.txt | grep foo | wc -l"),
            ["cat", "grep", "wc"]
        );
        assert_eq!(scopes("make |& tee log"), ["make", "tee"]);
        assert_eq!(scopes("sleep 5 & rm -rf x"), ["sleep", "rm"]);
        assert_eq!(scopes("cd src\nls"), ["cd", "ls"]);
        assert_eq!(scopes("(cd sub && make)"), ["cd", "make"]);
        assert_eq!(
            scopes("git add . && git commit -m x && git add y"),
            ["git add", "git commit"]
        );
    }

    #[test]
    fn scopes_respect_quotes_and_escapes() {
        assert_eq!(scopes("echo \"a && rm b\""), ["echo"]);
        assert_eq!(scopes("echo 'a; rm b' | cat"), ["echo", "cat"]);
        assert_eq!(scopes(r"echo a\;rm b"), ["echo"]);
        assert_eq!(scopes("echo \"it's\" && ls"), ["echo", "ls"]);
        assert_eq!(scopes("ls \\\n  -la && pwd"), ["ls", "pwd"]);
    }

    #[test]
    fn scopes_include_substituted_commands() {
        assert_eq!(scopes("echo $(rm x)"), ["echo", "rm"]);
        assert_eq!(
            scopes("echo \"$(git rev-parse HEAD)\""),
            ["echo", "git rev-parse"]
        );
        assert_eq!(scopes("echo `whoami` done"), ["echo", "whoami"]);
        assert_eq!(scopes("echo \"`rm -f y`\""), ["echo", "rm"]);
        assert_eq!(scopes("diff <(sort a) <(sort b)"), ["diff", "sort"]);
        assert_eq!(scopes("echo ${X:-$(id -u)}"), ["echo", "id"]);
        assert_eq!(scopes("echo $((1 + $(wc -l < f)))"), ["echo", "wc"]);
        assert_eq!(scopes("x=$(date) && echo $x"), ["date", "echo"]);
        assert_eq!(scopes("echo $(cat $(ls))"), ["echo", "cat", "ls"]);
    }

    #[test]
    fn scopes_skip_assignments_redirections_and_keywords() {
        assert_eq!(scopes("FOO=1 make build"), ["make build"]);
        assert_eq!(scopes("A=1 B=\"x y\" cargo test"), ["cargo test"]);
        assert_eq!(
            scopes("cargo test 2>&1 | tail -n 20"),
            ["cargo test", "tail"]
        );
        assert_eq!(scopes("ls > out.txt"), ["ls"]);
        assert_eq!(scopes(">log echo hi"), ["echo"]);
        assert_eq!(scopes("echo hi &> log"), ["echo"]);
        assert_eq!(scopes("wc -l < input.txt"), ["wc"]);
        assert_eq!(scopes("grep x <<< \"$(rm y)\""), ["grep", "rm"]);
        assert_eq!(
            scopes("if cargo test; then echo ok; else exit 1; fi"),
            ["cargo test", "echo", "exit"]
        );
        assert_eq!(scopes("for f in *.rs; do rustfmt $f; done"), ["rustfmt"]);
        assert_eq!(scopes("while true; do sleep 1; done"), ["true", "sleep"]);
        assert_eq!(scopes("! grep -q x f"), ["grep"]);
        assert_eq!(scopes("{ ls; pwd; }"), ["ls", "pwd"]);
        assert_eq!(scopes("ls # && rm -rf /"), ["ls"]);
        assert_eq!(scopes("arr=(a b c); echo ${arr[0]}"), ["echo"]);
        assert_eq!(scopes("((i++)); echo $i"), ["echo"]);
        assert_eq!(scopes("sudo rm -rf /"), ["sudo rm"]);
        assert_eq!(scopes("$EDITOR file"), ["$EDITOR"]);
    }

    #[test]
    fn scopes_skip_quoted_here_documents_but_not_expanding_ones() {
        assert_eq!(
            scopes("cat <<'EOF' > f.py\nimport os; os.remove('x')\nEOF\npython3 f.py"),
            ["cat", "python3"]
        );
        assert_eq!(
            scopes("cat <<EOF\nhello $(rm -rf z) there\n`id`\nEOF\nls"),
            ["cat", "rm", "id", "ls"]
        );
        assert_eq!(
            scopes("cat <<-END | sh\n\tnot a command\n\tEND\necho after"),
            ["cat", "sh", "echo"]
        );
    }

    #[test]
    fn scopes_never_cover_the_whole_tool() {
        assert_eq!(scopes("X=1"), ["X=1"]);
        assert_eq!(scopes("  # just a comment "), ["# just a comment"]);
        assert_eq!(scopes(""), [""]);
    }
}
