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
//! rest is streamed to that file as it arrives (see `buffer`).
//!
//! While a local command runs, the editor is shown its output a few times a
//! second, cleaned the same way, as the end of the output so far and as
//! the lines new since the last report (see `live`).
//!
//! Starting the shell, cleaning what it prints and reading a command line
//! into permission scopes are shared with the `process` tool, in
//! [`super::shell`].

mod buffer;
mod files;
mod live;
mod terminal;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use portable_pty::MasterPty;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::process_group::{Pid, Signal};

use super::shell::{self, ShellEnv};
use super::{CallInfo, Display, TerminalExit, Tool, ToolContext, ToolKind, ToolOutput};
use buffer::{OutputBuffer, Rendered};
use live::LiveReporter;
use terminal::run_in_terminal;

/// How often the editor is shown the output so far: a few times a second
/// reads as live, and a flood of output costs the editor no more reports.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);
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

pub use files::{
    OutputFiles, remove_process_output_files, sweep_stale as sweep_stale_output_files,
};

/// One session's `bash`: it owns the session's full-output files (removed
/// when the tool is dropped with its session). `BashTool::default()` passes
/// commands the environment by the built-in rules only.
#[derive(Clone, Debug, Default)]
pub struct BashTool {
    env: Arc<ShellEnv>,
    files: Arc<OutputFiles>,
}

impl BashTool {
    /// A `bash` whose commands inherit what `env` lets through.
    pub fn new(env: Arc<ShellEnv>) -> Self {
        Self {
            env,
            files: Arc::default(),
        }
    }
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Run a command in bash in the working directory. stdout and stderr are merged; stdin is \
         empty. The output is truncated to the last 2000 lines or 50 KB, whichever comes first; \
         when it is, the full output is saved to a file whose path is given at the end. A \
         non-zero exit code makes the result an error. Optionally set timeout (seconds) to kill \
         commands that may hang. Background processes are killed when the command ends."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<BashInput>()
    }

    /// The files the command writes by redirection or `tee` are its
    /// locations, so one outside the project is seen as such.
    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        let command = args
            .get("command")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        CallInfo {
            title: title(command),
            kind: ToolKind::Execute,
            locations: shell::write_locations(command, cwd),
        }
    }

    fn mutating(&self) -> bool {
        true
    }

    fn runs_commands(&self) -> bool {
        true
    }

    fn permission_scopes(&self, args: &serde_json::Value) -> Vec<String> {
        let command = args
            .get("command")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let scopes = shell::analyze(command).scopes();
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
                    let buffer = OutputBuffer::new(Arc::clone(&self.files));
                    run_in_terminal(Arc::clone(terminals), &input.command, timeout, buffer, ctx)
                        .await
                }
                None => {
                    let buffer = OutputBuffer::new(Arc::clone(&self.files));
                    run_local(&input.command, timeout, &self.env, buffer, ctx).await
                }
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

/// How a command ended, whether it ran here or in the editor's terminal.
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
// Running locally under a PTY

async fn run_local(
    command: &str,
    timeout: Option<u64>,
    env: &ShellEnv,
    mut output: OutputBuffer,
    ctx: &ToolContext,
) -> ToolOutput {
    if !ctx.cwd.is_dir() {
        return ToolOutput::error(format!(
            "The working directory {} does not exist or is not a directory, so the command \
             was not run.",
            ctx.cwd.display()
        ));
    }
    let (mut process, mut chunks) =
        match LocalProcess::spawn(command, &ctx.cwd, env, ctx.confine.as_ref()) {
            Ok(started) => started,
            Err(e) => return ToolOutput::error(format!("Could not run the command: {e}")),
        };

    let deadline = timeout.map(|seconds| Instant::now() + Duration::from_secs(seconds));
    let mut exit_poll = tokio::time::interval(EXIT_POLL);
    exit_poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut progress_tick = tokio::time::interval(PROGRESS_INTERVAL);
    progress_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut live = LiveReporter::default();
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
                if let Some(report) = live.report(&output) {
                    (ctx.progress)(vec![Display::Live(report)]);
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

    // What is left of the output, and how it ended, for a live view that
    // appends; the result itself follows.
    output.end();
    (ctx.progress)(vec![Display::Live(live.finish(&output, exit_of(&outcome)))]);
    let rendered = output.finish();
    let result = tool_output(&outcome, &rendered);
    let shown = result.text();
    ToolOutput {
        display: vec![Display::Text(shown)],
        ..result
    }
}

/// How `outcome` looks to a terminal: killed by pincer (timeout, cancel)
/// is neither a code nor a signal the command got by itself.
fn exit_of(outcome: &Outcome) -> TerminalExit {
    match outcome {
        Outcome::Exited { code, signal } => TerminalExit {
            exit_code: *code,
            signal: signal.clone(),
        },
        Outcome::TimedOut(_) | Outcome::Cancelled => TerminalExit::default(),
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

/// The shell and its process group. Dropping it kills the group (and what
/// left it), so no path out of a call (including the call's future being
/// dropped) leaves processes behind.
struct LocalProcess {
    /// The shell's pid, which is also its process group id.
    pid: Pid,
    /// The tag its processes carry, to find those that left the group.
    tag: String,
    child: Option<Box<dyn portable_pty::Child + Send + Sync>>,
    /// Released once the shell has been waited for.
    registration: Option<shell::ShellRegistration>,
    /// Holds the PTY open while we read it.
    _master: Box<dyn MasterPty + Send>,
    reaped: bool,
    group_killed: bool,
}

impl LocalProcess {
    /// Starts `bash -c command` on a new PTY, and a thread that reads it.
    fn spawn(
        command: &str,
        cwd: &Path,
        env: &ShellEnv,
        confine: Option<&super::sandbox::Confinement>,
    ) -> Result<(Self, mpsc::Receiver<Vec<u8>>), String> {
        // Same line, so line numbers in bash's messages match the command.
        let started = shell::spawn(
            &format!("exec </dev/null; {command}"),
            cwd,
            24,
            env,
            confine,
        )?;
        let process = Self {
            pid: started.pgid,
            tag: started.tag,
            child: Some(started.child),
            registration: Some(started.registration),
            _master: started.master,
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
                self.registration = None;
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
                self.registration = None;
                Some(Outcome::Exited {
                    code: None,
                    signal: None,
                })
            }
        }
    }

    /// SIGKILLs everything left in the group, and what left it.
    fn kill_group(&mut self) {
        shell::signal_group(self.pid, Signal::SIGKILL);
        shell::kill_command(self.pid, &self.tag);
        self.group_killed = true;
    }

    /// SIGTERM to the group, a short grace for the shell, then SIGKILL, and
    /// waits for the shell to be gone.
    async fn terminate(&mut self) {
        // Nothing cancels the cleanup itself.
        let never = CancellationToken::new();
        let pid = self.pid;
        shell::terminate_group(pid, TERM_GRACE, &never, || self.try_wait().is_some()).await;
        // Even once the shell is gone: what it left running goes too.
        self.kill_group();
        shell::wait_until(KILL_WAIT, &never, || {
            self.reaped || self.try_wait().is_some()
        })
        .await;
    }
}

impl Drop for LocalProcess {
    fn drop(&mut self) {
        if !self.group_killed {
            shell::signal_group(self.pid, Signal::SIGKILL);
            shell::kill_command(self.pid, &self.tag);
        }
        if !self.reaped
            && let Some(mut child) = self.child.take()
        {
            // Reap it off the async runtime so it does not linger as a zombie.
            let registration = self.registration.take();
            let _ = std::thread::Builder::new()
                .name("pincer-bash-reap".to_string())
                .spawn(move || {
                    let _ = child.wait();
                    drop(registration);
                });
        }
    }
}

/// Reads the PTY on its own thread (reads block) and passes the bytes on.
/// The thread ends when the PTY closes or the receiver is dropped.
fn spawn_reader(reader: Box<dyn std::io::Read + Send>) -> std::io::Result<mpsc::Receiver<Vec<u8>>> {
    let (sender, receiver) = mpsc::channel(64);
    std::thread::Builder::new()
        .name("pincer-bash-pty".to_string())
        .spawn(move || {
            shell::read_chunks(reader, |bytes| sender.blocking_send(bytes.to_vec()).is_ok());
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

#[cfg(test)]
mod tests {
    //! Runs of the tool itself; the fixture is shared with the editor
    //! terminal's tests.

    use super::*;
    use parking_lot::Mutex;
    use pretty_assertions::assert_eq;

    pub(super) static TOOL: std::sync::LazyLock<BashTool> =
        std::sync::LazyLock::new(BashTool::default);

    pub(super) struct Fixture {
        pub(super) dir: tempfile::TempDir,
        pub(super) ctx: ToolContext,
        progress: Arc<Mutex<Vec<Vec<Display>>>>,
    }

    impl Fixture {
        pub(super) fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let mut ctx = ToolContext::local(dir.path().to_path_buf());
            let progress = Arc::new(Mutex::new(Vec::new()));
            let sink = Arc::clone(&progress);
            ctx.progress = Arc::new(move |update| sink.lock().push(update));
            Self { dir, ctx, progress }
        }

        pub(super) async fn run(&self, args: serde_json::Value) -> ToolOutput {
            // A hang must fail the test, not the whole run.
            tokio::time::timeout(Duration::from_secs(60), TOOL.execute(args, &self.ctx))
                .await
                .expect("the bash tool hung")
        }

        pub(super) fn progress(&self) -> Vec<Vec<Display>> {
            self.progress.lock().clone()
        }
    }

    pub(super) fn details(exit_code: Option<u32>) -> serde_json::Value {
        json!({
            "exitCode": exit_code,
            "timedOut": false,
            "cancelled": false,
            "truncated": false,
            "fullOutputPath": null,
        })
    }

    /// The result a call should give, shown to the editor as `display`.
    pub(super) fn result(
        text: &str,
        is_error: bool,
        details: serde_json::Value,
        display: Display,
    ) -> ToolOutput {
        let base = if is_error {
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        };
        ToolOutput {
            details,
            display: vec![display],
            ..base
        }
    }

    /// A local run's result: `display` repeats the text.
    fn local(text: &str, is_error: bool, details: serde_json::Value) -> ToolOutput {
        result(text, is_error, details, Display::Text(text.to_string()))
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
            if let [Display::Live(live)] = update.as_slice()
                && live.tail == "started"
            {
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
            .run(json!({"command": "for i in 1 2 3 4 5 6; do echo $i; sleep 0.15; done; exit 2"}))
            .await;
        assert_eq!(
            output,
            local(
                "1\n2\n3\n4\n5\n6\n\nCommand exited with code 2",
                true,
                details(Some(2))
            )
        );
        let updates = f.progress();
        assert!(updates.len() >= 3, "too few updates: {updates:?}");
        let mut lives = Vec::new();
        for update in updates {
            match update.as_slice() {
                [Display::Live(live)] => lives.push(live.clone()),
                other => panic!("unexpected update {other:?}"),
            }
        }
        for live in &lives {
            assert!(
                "1\n2\n3\n4\n5\n6".starts_with(live.tail.as_str()),
                "{live:?}"
            );
        }
        // Appended, the reports are the whole output once; only the last
        // says how the command ended.
        let appended: String = lives.iter().map(|l| l.appended.as_str()).collect();
        assert_eq!(appended, "1\n2\n3\n4\n5\n6\n");
        let exits: Vec<Option<TerminalExit>> = lives.iter().map(|l| l.exit.clone()).collect();
        let mut expected = vec![None; lives.len() - 1];
        expected.push(Some(TerminalExit {
            exit_code: Some(2),
            signal: None,
        }));
        assert_eq!(exits, expected);
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
            *TOOL.parameters(),
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
    fn scopes_never_cover_the_whole_tool() {
        assert_eq!(scopes("X=1"), ["X=1"]);
        assert_eq!(scopes("  # just a comment "), ["# just a comment"]);
        assert_eq!(scopes(""), [""]);
    }
}
