//! The `process` tool: commands that keep running in the background while the
//! conversation goes on — dev servers, file watchers, REPLs.
//!
//! `bash` waits for its command to end, so it cannot host a server the model
//! then wants to test against. Here a command starts under its own
//! pseudo-terminal (so it prints and prompts as it would for a person) in its
//! own process group, and the model comes back to it by id (`p1`, `p2`, …):
//! it polls for what was printed since it last looked, types input, lists
//! what is running, and kills it. Output is cleaned of terminal escapes as it
//! arrives and held in a bounded buffer until polled, so a chatty watcher
//! nobody polls costs at most a megabyte.
//!
//! The processes belong to the session: pincer creates one tool instance per
//! session and the registry lives in it. Dropping the registry — the session
//! ends — terminates every process group it started (SIGTERM, then SIGKILL
//! after a short grace), so nothing outlives the session. The threads that
//! read a terminal or wait for a process hold only that process's output
//! buffer, never the registry, and end when the process group is gone.

use parking_lot::{Mutex, MutexGuard};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use portable_pty::MasterPty;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::process_group::{Pid, Signal};

use super::shell::{
    self, CHECK_INTERVAL, Cleaner, MAX_BYTES, MAX_LINES, ShellEnv, group_alive, kill_command,
    signal_group, wait_until,
};
use super::{CallInfo, Tool, ToolContext, ToolKind, ToolOutput};

/// How long `start` waits for the first output.
const START_WAIT: Duration = Duration::from_secs(1);
/// Once output has appeared, this much silence ends `start`'s wait early.
const START_QUIET: Duration = Duration::from_millis(200);
/// How long a killed group gets to exit after SIGTERM before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for the group to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(1);
/// How long to wait for the terminal to deliver an ended process's last output.
const KILL_DRAIN: Duration = Duration::from_millis(500);
/// How long `send` waits for the terminal to take the input.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Most unpolled output kept per process; older output is dropped first.
const MAX_BUFFERED: usize = 1024 * 1024;
/// Output kept for a job's "what it said last".
const RECENT: usize = 4096;
/// How often a job's watcher passes on what the process said.
const JOB_REPORT: Duration = Duration::from_millis(500);
/// Longest a command is shown in titles and headers.
const MAX_TITLE_CHARS: usize = 100;

/// What a `process` call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum Action {
    Start,
    List,
    Poll,
    Send,
    Kill,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::List => "list",
            Self::Poll => "poll",
            Self::Send => "send",
            Self::Kill => "kill",
        }
    }
}

// Arguments of a `process` call; the field docs are the schema the model sees.
// One flat object rather than a tagged union, because providers require a
// top-level `"type": "object"` schema.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProcessInput {
    /// "start" runs `command` in the background and returns its id with its first output; "list" shows this session's processes; "poll" returns what `id` printed since the last poll and its state; "send" types `input` into `id`; "kill" stops `id` and everything it started.
    pub action: Action,
    /// For start: the shell command line to run with bash in the working directory, e.g. "npm run dev".
    pub command: Option<String>,
    /// For poll, send and kill: the id that start returned, e.g. "p1".
    pub id: Option<String>,
    /// For send: the text to type into the process, exactly as given. No newline is added: end it with "\n" to submit a line. Control characters act as keys ("\u0003" is Ctrl-C, "\u0004" is Ctrl-D).
    pub input: Option<String>,
}

/// Runs and tracks one session's background processes.
#[derive(Default)]
pub struct ProcessTool {
    registry: Arc<Mutex<Registry>>,
    /// What the commands inherit of pincer's environment.
    env: Arc<ShellEnv>,
    /// The session's background jobs: each process is one, whose end
    /// the session is told of. `None`: nobody is (a headless run).
    jobs: Option<Arc<super::jobs::Jobs>>,
}

impl ProcessTool {
    /// Commands get the environment by the built-in rules only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Commands inherit what `env` lets through.
    pub fn with_env(env: Arc<ShellEnv>) -> Self {
        Self {
            registry: Arc::default(),
            env,
            jobs: None,
        }
    }

    /// [`ProcessTool::with_env`], each process a job of `jobs`.
    pub fn with_jobs(env: Arc<ShellEnv>, jobs: Arc<super::jobs::Jobs>) -> Self {
        Self {
            jobs: Some(jobs),
            ..Self::with_env(env)
        }
    }
}

impl Tool for ProcessTool {
    fn holds_work(&self) -> bool {
        self.registry
            .lock()
            .entries
            .iter()
            .any(|entry| entry.handle.shared.lock().exit.is_none())
    }

    fn name(&self) -> &str {
        "process"
    }

    fn description(&self) -> &str {
        "Run and manage long-running commands in the background for this session, such as dev \
         servers, file watchers or REPLs; use bash instead for commands that finish on their \
         own. action=start runs `command` with bash in the working directory under a terminal \
         and returns an id (p1, p2, …) with the output of its first second. action=poll returns \
         what `id` printed since the last poll (at most the last 2000 lines or 50 KB) and whether \
         it is still running. action=send types `input` into `id`; no newline is added, so \
         include \"\\n\" to submit a line. action=kill stops `id` and every process it started. \
         action=list shows every process with its state and runtime. Processes are stopped when \
         the session ends."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<ProcessInput>()
    }

    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        let field = |name: &str| args.get(name).and_then(serde_json::Value::as_str);
        let id = field("id").unwrap_or("process");
        let title = match field("action") {
            Some("start") => match field("command") {
                Some(command) => format!("Start: {}", short_command(command)),
                None => "Start a background process".to_string(),
            },
            Some("list") => "List background processes".to_string(),
            Some("poll") => format!("Poll {id}"),
            Some("send") => format!("Send input to {id}"),
            Some("kill") => format!("Kill {id}"),
            _ => "Background process".to_string(),
        };
        let locations = match (field("action"), field("command")) {
            (Some("start"), Some(command)) => shell::write_locations(command, cwd),
            _ => Vec::new(),
        };
        CallInfo {
            title,
            kind: ToolKind::Execute,
            locations,
        }
    }

    fn mutating(&self) -> bool {
        true
    }

    fn runs_commands(&self) -> bool {
        true
    }

    /// `start` is scoped by the commands it runs, like `bash`; the other
    /// actions by name, so polling can be allowed once without allowing
    /// every command.
    fn permission_scopes(&self, args: &serde_json::Value) -> Vec<String> {
        let field = |name: &str| args.get(name).and_then(serde_json::Value::as_str);
        let action = field("action").unwrap_or_default();
        if action == "start"
            && let Some(command) = field("command")
        {
            let prefixes = shell::analyze(command).scopes();
            if !prefixes.is_empty() {
                return prefixes;
            }
        }
        if action.is_empty() {
            vec!["process".to_string()]
        } else {
            vec![format!("process {action}")]
        }
    }

    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: ProcessInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            let result = match input.action {
                Action::Start => self.start(input.command, ctx).await,
                Action::List => Ok(self.list()),
                Action::Poll => self.poll(input.id).await,
                Action::Send => self.send(input.id, input.input).await,
                Action::Kill => self.kill(input.id, &ctx.cancel).await,
            };
            result.unwrap_or_else(|error| error)
        })
    }
}

// The error is the call's result, returned once per call.
#[allow(clippy::result_large_err)]
impl ProcessTool {
    async fn start(
        &self,
        command: Option<String>,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolOutput> {
        let command = match command {
            Some(command) if !command.trim().is_empty() => command,
            _ => {
                return Err(ToolOutput::error(
                    "start needs `command`: the shell command line to run in the background, \
                     e.g. \"npm run dev\".",
                ));
            }
        };
        let spawned = spawn(&command, &ctx.cwd, &self.env, ctx.confine.as_ref()).map_err(|e| {
            ToolOutput::error(format!(
                "Could not start `{}` in {}: {e}",
                short_command(&command),
                ctx.cwd.display()
            ))
        })?;
        let handle = {
            let mut registry = self.registry.lock();
            registry.started += 1;
            let handle = Handle {
                id: format!("p{}", registry.started),
                command,
                pgid: spawned.pgid,
                tag: spawned.tag,
                started: Instant::now(),
                shared: spawned.shared,
                writer: Arc::new(Mutex::new(spawned.writer)),
                job: None,
            };
            registry.entries.push(Entry {
                handle: handle.clone(),
                _master: spawned.master,
            });
            handle
        };

        let handle = match &self.jobs {
            Some(jobs) => {
                let title = format!(
                    "Process {}: `{}`",
                    handle.id,
                    short_command(&handle.command)
                );
                let (job, cancel) = jobs.start("shell", &title, None, &ctx.call_id);
                let handle = Handle {
                    job: Some(job.clone()),
                    ..handle
                };
                if let Some(entry) = self
                    .registry
                    .lock()
                    .entries
                    .iter_mut()
                    .find(|e| e.handle.id == handle.id)
                {
                    entry.handle.job = Some(job.clone());
                }
                tokio::spawn(watch(handle.clone(), jobs.clone(), job, cancel));
                handle
            }
            None => handle,
        };

        // Wait for the first output (a server's "listening on"), but not for
        // a process that keeps printing.
        let shared = Arc::clone(&handle.shared);
        wait_until(START_WAIT, &ctx.cancel, move || {
            let output = shared.lock();
            (output.exit.is_some() && output.closed)
                || output
                    .last_output
                    .is_some_and(|at| at.elapsed() >= START_QUIET)
        })
        .await;

        let id = &handle.id;
        let report = handle.report();
        self.seen(&handle);
        let header = format!(
            "Started {id}: {}\nState: {}\nOutput so far:",
            short_command(&handle.command),
            report.state
        );
        Ok(report.output(
            header,
            "(none yet)",
            &format!(
                "Use poll with id \"{id}\" for new output, send to type into it, kill to stop it."
            ),
        ))
    }

    fn list(&self) -> ToolOutput {
        let handles: Vec<Handle> = self
            .registry
            .lock()
            .entries
            .iter()
            .map(|entry| entry.handle.clone())
            .collect();
        if handles.is_empty() {
            return ToolOutput {
                details: json!({ "processes": [] }),
                ..ToolOutput::ok(
                    "No background processes in this session. Start one with action \"start\".",
                )
            };
        }
        let mut lines = vec![format!("Background processes ({}):", handles.len())];
        let mut details = Vec::new();
        for handle in &handles {
            let exit = handle.shared.lock().exit.clone();
            lines.push(format!(
                "{}: {} — {}",
                handle.id,
                state_phrase(handle.started, exit.as_ref()),
                short_command(&handle.command)
            ));
            details.push(handle.details(exit.as_ref()));
        }
        ToolOutput {
            details: json!({ "processes": details }),
            ..ToolOutput::ok(lines.join("\n"))
        }
    }

    async fn poll(&self, id: Option<String>) -> Result<ToolOutput, ToolOutput> {
        let handle = self.find(Action::Poll, id.as_deref())?;
        if handle.shared.lock().exit.is_some() {
            // "Exited" must come with everything it printed.
            final_output(&handle.shared).await;
        }
        let report = handle.report();
        self.seen(&handle);
        let header = format!(
            "{}: {}\nState: {}\nNew output:",
            handle.id,
            short_command(&handle.command),
            report.state
        );
        Ok(report.output(header, "(none since the last poll)", ""))
    }

    async fn send(
        &self,
        id: Option<String>,
        input: Option<String>,
    ) -> Result<ToolOutput, ToolOutput> {
        let handle = self.find(Action::Send, id.as_deref())?;
        let input = match input {
            Some(input) if !input.is_empty() => input,
            _ => {
                return Err(ToolOutput::error(
                    "send needs `input`: the text to type into the process. No newline is \
                     added, so end it with \"\\n\" to submit a line.",
                ));
            }
        };
        if let Some(exit) = handle.shared.lock().exit.clone() {
            return Err(ToolOutput::error(format!(
                "{} has already {}, so it cannot take input. Poll it for its last output, or \
                 start the command again.",
                handle.id,
                exit.ended.phrase()
            )));
        }

        let writer = Arc::clone(&handle.writer);
        let bytes = input.clone().into_bytes();
        let (done, written) = tokio::sync::oneshot::channel();
        // A write blocks while the terminal's input buffer is full (the
        // program is not reading), so it runs off the async runtime.
        std::thread::Builder::new()
            .name("pincer-process-input".to_string())
            .spawn(move || {
                let mut writer = writer.lock();
                let result = writer.write_all(&bytes).and_then(|()| writer.flush());
                let _ = done.send(result);
            })
            .map_err(|e| ToolOutput::error(format!("Could not send input: {e}")))?;
        match tokio::time::timeout(SEND_TIMEOUT, written).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                return Err(ToolOutput::error(format!(
                    "Could not send input to {}: {e}. Poll it to see whether it is still running.",
                    handle.id
                )));
            }
            Ok(Err(_)) | Err(_) => {
                return Err(ToolOutput::error(format!(
                    "{} is not reading its input: the terminal did not take it within {}s. \
                     Poll it to see what it is doing, or kill it.",
                    handle.id,
                    SEND_TIMEOUT.as_secs()
                )));
            }
        }

        let mut text = format!(
            "Sent {} bytes to {}. Poll it to see the response.",
            input.len(),
            handle.id
        );
        if !input.ends_with(['\n', '\r']) && !input.chars().any(char::is_control) {
            text.push_str(
                " The input does not end with a newline; a program reading lines waits until \
                 you send \"\\n\".",
            );
        }
        Ok(ToolOutput {
            details: handle.details(None),
            ..ToolOutput::ok(text)
        })
    }

    async fn kill(
        &self,
        id: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, ToolOutput> {
        let handle = self.find(Action::Kill, id.as_deref())?;
        let was_running = handle.shared.lock().exit.is_none();
        let mut steps = Vec::new();
        if group_alive(handle.pgid) {
            let gone = || handle.shared.lock().exit.is_some() && !group_alive(handle.pgid);
            if !shell::terminate_group(handle.pgid, KILL_GRACE, cancel, gone).await {
                steps.push(format!(
                    "It was still running {}s after SIGTERM, so it got SIGKILL.",
                    KILL_GRACE.as_secs()
                ));
                if !wait_until(KILL_WAIT, &CancellationToken::new(), gone).await {
                    steps.push(
                        "Some of its processes have not ended yet (they may be stuck in the \
                         kernel); check with list."
                            .to_string(),
                    );
                }
            }
            if !was_running {
                steps.insert(
                    0,
                    "Its shell had already exited; the processes it left running were stopped."
                        .to_string(),
                );
            }
        } else if !was_running {
            steps.push("It had already ended; nothing was left to stop.".to_string());
        }
        // Then what left the group (`setsid`), without ceremony.
        kill_command(handle.pgid, &handle.tag);
        // The terminal may still hold the last lines the group printed.
        let shared = Arc::clone(&handle.shared);
        wait_until(KILL_DRAIN, cancel, move || shared.lock().closed).await;

        let report = handle.report();
        self.seen(&handle);
        let verb = if was_running { "Killed" } else { "Stopped" };
        let header = format!(
            "{verb} {}: {}\nState: {}\nFinal output:",
            handle.id,
            short_command(&handle.command),
            report.state
        );
        Ok(report.output(header, "(none since the last poll)", &steps.join(" ")))
    }

    /// The model saw that the process ended (a poll, a kill): its job
    /// ends without telling anyone again.
    fn seen(&self, handle: &Handle) {
        let (Some(jobs), Some(job)) = (&self.jobs, &handle.job) else {
            return;
        };
        if let Some(exit) = handle.shared.lock().exit.clone() {
            jobs.seen(job, exit.ended.phrase());
        }
    }

    /// The process `id` names, or an error that says which ids exist.
    fn find(&self, action: Action, id: Option<&str>) -> Result<Handle, ToolOutput> {
        let registry = self.registry.lock();
        let Some(id) = id.map(str::trim).filter(|id| !id.is_empty()) else {
            return Err(ToolOutput::error(format!(
                "{} needs `id`: the id that start returned, e.g. \"p1\". Use action \"list\" to \
                 see the ids.",
                action.name()
            )));
        };
        let bare = id.strip_prefix('p').unwrap_or(id);
        if let Some(entry) = registry
            .entries
            .iter()
            .find(|entry| entry.handle.id[1..] == *bare)
        {
            return Ok(entry.handle.clone());
        }
        let known: Vec<&str> = registry
            .entries
            .iter()
            .map(|entry| entry.handle.id.as_str())
            .collect();
        Err(ToolOutput::error(if known.is_empty() {
            format!(
                "No background process has id \"{id}\": this session has not started any. \
                 Start one with action \"start\"."
            )
        } else {
            format!(
                "No background process has id \"{id}\". This session's processes are {}; use \
                 action \"list\" to see them.",
                known.join(", ")
            )
        }))
    }
}

// ---------------------------------------------------------------------------
// The registry

#[derive(Default)]
struct Registry {
    /// How many processes were started; the next id is one more.
    started: u64,
    entries: Vec<Entry>,
}

/// A started process, owned by the registry. Dropping it stops the process
/// group.
struct Entry {
    handle: Handle,
    /// Keeps the terminal open for the process.
    _master: Box<dyn MasterPty + Send>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let pgid = self.handle.pgid;
        // What left the group goes now: pincer may be exiting.
        kill_command(pgid, &self.handle.tag);
        if !group_alive(pgid) {
            return;
        }
        signal_group(pgid, Signal::SIGTERM);
        // Drop may run on an async worker, which must not block for the
        // grace period; the escalation gets a thread that ends with it.
        let escalation = std::thread::Builder::new()
            .name("pincer-process-kill".to_string())
            .spawn(move || {
                let deadline = Instant::now() + KILL_GRACE;
                while Instant::now() < deadline {
                    if !group_alive(pgid) {
                        return;
                    }
                    std::thread::sleep(CHECK_INTERVAL);
                }
                signal_group(pgid, Signal::SIGKILL);
            });
        if escalation.is_err() {
            signal_group(pgid, Signal::SIGKILL);
        }
    }
}

/// What a call needs of a process, cloned out so the registry is not
/// locked while the call waits.
#[derive(Clone)]
struct Handle {
    id: String,
    command: String,
    /// The shell's pid, which is also its process group (and session) id.
    pgid: Pid,
    /// The tag its processes carry, to find those that left the group.
    tag: String,
    started: Instant,
    shared: Arc<Shared>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    /// Its job in the session's table.
    job: Option<String>,
}

impl Handle {
    /// Takes the unpolled output and reads the state.
    fn report(&self) -> Report {
        let (taken, dropped, exit) = {
            let mut output = self.shared.lock();
            let taken = std::mem::take(&mut output.unread);
            let dropped = std::mem::take(&mut output.dropped);
            (taken, dropped, output.exit.clone())
        };
        let (text, cut) = bound(&taken, dropped);
        Report {
            state: state_phrase(self.started, exit.as_ref()),
            details: self.details(exit.as_ref()),
            text,
            cut,
        }
    }

    fn details(&self, exit: Option<&Exit>) -> serde_json::Value {
        let end = exit.map_or_else(Instant::now, |exit| exit.at);
        let runtime = end.saturating_duration_since(self.started);
        let (code, signal) = match exit.map(|exit| &exit.ended) {
            Some(Ended::Code(code)) => (Some(*code), None),
            Some(Ended::Signal(signal)) => (None, Some(signal.as_str())),
            _ => (None, None),
        };
        json!({
            "id": self.id,
            "command": self.command,
            "pid": self.pgid.as_raw(),
            "state": if exit.is_some() { "exited" } else { "running" },
            "exitCode": code,
            "signal": signal,
            "runtimeMs": u64::try_from(runtime.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

/// Follows a process's job: passes on what it prints, stops it when the
/// job is stopped (`/tasks stop`, the session closing), and ends the job
/// when the process ends.
async fn watch(
    handle: Handle,
    jobs: Arc<super::jobs::Jobs>,
    job: String,
    cancel: CancellationToken,
) {
    let mut reported = None;
    loop {
        let (exit, last, recent) = {
            let output = handle.shared.lock();
            (
                output.exit.clone(),
                output.last_output,
                output.recent.clone(),
            )
        };
        if last != reported {
            reported = last;
            jobs.progress(&job, &recent);
        }
        if let Some(exit) = exit {
            let failed = !matches!(exit.ended, Ended::Code(0));
            let recent = final_output(&handle.shared).await;
            let text = format!(
                "`{}` {}.{}",
                short_command(&handle.command),
                exit.ended.phrase(),
                last_lines(&recent)
            );
            jobs.finish(&job, text, failed);
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(JOB_REPORT) => {}
            () = cancel.cancelled() => {
                let gone = || handle.shared.lock().exit.is_some() && !group_alive(handle.pgid);
                shell::terminate_group(handle.pgid, KILL_GRACE, &CancellationToken::new(), gone)
                    .await;
                kill_command(handle.pgid, &handle.tag);
                let recent = handle.shared.lock().recent.clone();
                jobs.stopped(
                    &job,
                    format!("`{}` was stopped.{}", short_command(&handle.command), last_lines(&recent)),
                );
                return;
            }
        }
    }
}

/// What an exited process printed last. The waiter thread sees the exit
/// before the reader has drained the terminal, so this waits (briefly: a
/// child the shell left running may hold the terminal open) for the reader
/// to reach the end.
async fn final_output(shared: &Shared) -> String {
    // Counted from the exit: a terminal still open that long after it (a
    // child holds it) does not hold every later poll too.
    let left = shared.lock().exit.as_ref().map_or(KILL_DRAIN, |exit| {
        KILL_DRAIN.saturating_sub(exit.at.elapsed())
    });
    wait_until(left, &CancellationToken::new(), || shared.lock().closed).await;
    shared.lock().recent.clone()
}

/// " Last output:" and the last lines of `recent`, or nothing.
fn last_lines(recent: &str) -> String {
    let lines: Vec<&str> = recent.trim_end().lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let start = lines.len().saturating_sub(20);
    format!(" Last output:\n{}", lines[start..].join("\n"))
}

/// Output taken for one result, with the process's state.
struct Report {
    state: String,
    details: serde_json::Value,
    text: String,
    /// Bytes of output left out of `text` (0 when all of it is there).
    cut: usize,
}

impl Report {
    /// `header`, then the output (or `none`), then `footer` if any.
    fn output(self, header: String, none: &str, footer: &str) -> ToolOutput {
        let mut text = header;
        if self.cut > 0 {
            text.push_str(&format!(
                "\n[{:.1} KB of earlier output not shown: one result holds the last {MAX_LINES} \
                 lines or 50 KB. Poll more often, or redirect the output to a file \
                 (`command > out.log 2>&1`) and read that.]",
                self.cut as f64 / 1024.0
            ));
        }
        let shown = self.text.strip_suffix('\n').unwrap_or(&self.text);
        if shown.is_empty() && self.cut == 0 {
            text.push(' ');
            text.push_str(none);
        } else {
            text.push('\n');
            text.push_str(shown);
        }
        if !footer.is_empty() {
            text.push_str("\n\n");
            text.push_str(footer);
        }
        let mut details = self.details;
        if let Some(object) = details.as_object_mut() {
            object.insert("output".to_string(), json!(self.text));
            object.insert("truncated".to_string(), json!(self.cut > 0));
        }
        ToolOutput {
            details,
            ..ToolOutput::ok(text)
        }
    }
}

/// "running for 5s", "exited with code 0 after 2s".
fn state_phrase(started: Instant, exit: Option<&Exit>) -> String {
    match exit {
        None => format!("running for {}", format_duration(started.elapsed())),
        Some(exit) => format!(
            "{} after {}",
            exit.ended.phrase(),
            format_duration(exit.at.saturating_duration_since(started))
        ),
    }
}

fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {}s", secs / 60, secs % 60),
        _ => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
    }
}

/// The first line of a command, shortened for titles.
fn short_command(command: &str) -> String {
    let trimmed = command.trim();
    let first_line = trimmed.lines().next().unwrap_or_default();
    let mut short: String = first_line.chars().take(MAX_TITLE_CHARS).collect();
    if short.len() < trimmed.len() {
        short.push_str(" …");
    }
    short
}

// ---------------------------------------------------------------------------
// Starting a process

/// A started process before it has an id.
struct Spawned {
    pgid: Pid,
    tag: String,
    shared: Arc<Shared>,
    writer: Box<dyn Write + Send>,
    master: Box<dyn MasterPty + Send>,
}

/// Starts `bash -c command` on a new terminal, with a thread that reaps it
/// and one that reads its output.
fn spawn(
    command: &str,
    cwd: &Path,
    env: &ShellEnv,
    confine: Option<&super::sandbox::Confinement>,
) -> Result<Spawned, String> {
    if !cwd.is_dir() {
        return Err("the working directory does not exist".to_string());
    }
    let shell::Shell {
        mut child,
        pgid,
        master,
        tag,
        registration,
    } = shell::spawn(command, cwd, 50, env, confine)?;
    let shared = Arc::new(Shared::default());

    let waited = Arc::clone(&shared);
    let waiter = std::thread::Builder::new()
        .name("pincer-process-wait".to_string())
        .spawn(move || {
            let ended = match child.wait() {
                Ok(status) => match status.signal() {
                    Some(signal) => Ended::Signal(signal.to_string()),
                    None => Ended::Code(status.exit_code()),
                },
                Err(e) => Ended::Unknown(e.to_string()),
            };
            drop(registration);
            waited.lock().exit = Some(Exit {
                ended,
                at: Instant::now(),
            });
        });
    if let Err(e) = waiter {
        // The child went with the failed closure, unreaped; at least stop it.
        signal_group(pgid, Signal::SIGKILL);
        return Err(format!("could not start a thread: {e}"));
    }

    let streams = master
        .try_clone_reader()
        .map_err(|e| format!("could not read the pseudo-terminal: {e:#}"))
        .and_then(|reader| {
            let writer = master
                .take_writer()
                .map_err(|e| format!("could not write to the pseudo-terminal: {e:#}"))?;
            Ok((reader, writer))
        })
        .and_then(|(reader, writer)| {
            let read = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("pincer-process-read".to_string())
                .spawn(move || {
                    shell::read_chunks(reader, |bytes| {
                        read.lock().push(bytes);
                        true
                    });
                    read.lock().close();
                })
                .map_err(|e| format!("could not start a thread: {e}"))?;
            Ok(writer)
        });
    match streams {
        Ok(writer) => Ok(Spawned {
            pgid,
            tag,
            shared,
            writer,
            master,
        }),
        Err(e) => {
            signal_group(pgid, Signal::SIGKILL);
            Err(e)
        }
    }
}

// ---------------------------------------------------------------------------
// Output

/// What the reader and waiter threads share with the registry.
#[derive(Debug, Default)]
struct Shared {
    output: Mutex<Output>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Output> {
        self.output.lock()
    }
}

#[derive(Debug, Default)]
struct Output {
    cleaner: Cleaner,
    /// Cleaned output not yet returned by a call.
    unread: String,
    /// Bytes of unread output dropped to bound memory.
    dropped: usize,
    /// The end of everything printed, polled or not (bounded).
    recent: String,
    /// When output last arrived.
    last_output: Option<Instant>,
    /// The terminal closed: no more output will come.
    closed: bool,
    exit: Option<Exit>,
}

impl Output {
    fn push(&mut self, bytes: &[u8]) {
        let before = self.unread.len();
        self.cleaner.feed(bytes, &mut self.unread);
        // What it printed last, kept apart from what polls take (for
        // `/tasks` and the note when it ends).
        self.recent.push_str(&self.unread[before..]);
        if self.recent.len() > RECENT {
            let cut = self
                .recent
                .ceil_char_boundary(self.recent.len() - RECENT / 2);
            self.recent.drain(..cut);
        }
        self.last_output = Some(Instant::now());
        if self.unread.len() > MAX_BUFFERED {
            // Keep the newer half, from a line start where there is one, so
            // trimming is rare and each poll still has more than it shows.
            let mut cut = self
                .unread
                .ceil_char_boundary(self.unread.len() - MAX_BUFFERED / 2);
            if let Some(newline) = self.unread[cut..].find('\n') {
                cut += newline + 1;
            }
            self.unread.drain(..cut);
            self.dropped += cut;
        }
    }

    fn close(&mut self) {
        self.cleaner.finish(&mut self.unread);
        self.closed = true;
    }
}

#[derive(Clone, Debug)]
struct Exit {
    ended: Ended,
    /// When the exit was seen (the waiter sees it at once).
    at: Instant,
}

/// How the shell ended.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ended {
    Code(u32),
    /// The signal's description ("Terminated", "Killed").
    Signal(String),
    /// Waiting failed; the process is gone but how it ended is not known.
    Unknown(String),
}

impl Ended {
    fn phrase(&self) -> String {
        match self {
            Self::Code(code) => format!("exited with code {code}"),
            Self::Signal(signal) => format!("ended by signal ({signal})"),
            Self::Unknown(error) => format!("ended (exit status unknown: {error})"),
        }
    }
}

/// The last `MAX_LINES` lines and `MAX_BYTES` of `text`, cut at a line start
/// where possible, and how many bytes were left out (including `dropped`,
/// output already discarded before).
fn bound(text: &str, dropped: usize) -> (String, usize) {
    let mut start = 0;
    let lines = text.split_inclusive('\n').count();
    if lines > MAX_LINES {
        let skip = lines - MAX_LINES;
        start = text
            .match_indices('\n')
            .nth(skip - 1)
            .map_or(0, |(at, _)| at + 1);
    }
    if text.len() - start > MAX_BYTES {
        start = text.ceil_char_boundary(text.len() - MAX_BYTES);
        // Start at a whole line unless the last line alone is too long.
        if let Some(newline) = text[start..].find('\n')
            && start + newline + 1 < text.len()
        {
            start += newline + 1;
        }
    }
    (text[start..].to_string(), start + dropped)
}

#[cfg(test)]
mod tests;
