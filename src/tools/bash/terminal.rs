//! Running a `bash` call in one of the editor's terminals, when the editor
//! offers them (ACP `terminal/*`), so the user watches the command live in
//! the editor rather than in a copy pincer streams.
//!
//! The editor owns the process, so pincer only asks: create the terminal,
//! wait for the exit (or kill it on timeout or cancel), fetch the output,
//! release the terminal. The output goes through the same buffer as a local
//! run, so the model sees it cleaned and cut the same way. A call dropped
//! midway still kills and releases the terminal, from a spawned task.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::buffer::OutputBuffer;
use super::{Outcome, join_message, shown_text, sleep_until, tool_output};
use crate::tools::{Display, TerminalCommand, TerminalExit, Terminals, ToolContext, ToolOutput};

/// Output an editor terminal keeps for us (it drops the oldest beyond this).
const TERMINAL_OUTPUT_LIMIT: u64 = 1024 * 1024;
/// How long one request to the editor's terminal may take once we are done.
const EDITOR_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `command` in a new terminal of the editor and reports it as a local
/// run would be, showing the editor's terminal instead of the text.
pub(super) async fn run_in_terminal(
    terminals: Arc<dyn Terminals>,
    command: &str,
    timeout: Option<u64>,
    mut buffer: OutputBuffer,
    ctx: &ToolContext,
) -> ToolOutput {
    // In a sandbox, the editor starts pincer's launcher, which confines
    // itself before it becomes bash.
    let bash_args = vec!["-c".to_string(), command.to_string()];
    let (program, args) = match &ctx.confine {
        Some(confine) => confine.command("bash", &bash_args),
        None => ("bash".to_string(), bash_args),
    };
    let request = TerminalCommand {
        command: program,
        args,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::bash::tests::{Fixture, TOOL, details, result};
    use crate::tools::{TerminalOutput, Tool};
    use futures::future::BoxFuture;
    use parking_lot::Mutex;
    use pretty_assertions::assert_eq;
    use serde_json::json;

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
            self.calls.lock().push(call);
        }

        fn calls(&self) -> Vec<Call> {
            self.calls.lock().clone()
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
        result(
            text,
            is_error,
            details,
            Display::Terminal("term-1".to_string()),
        )
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
}
