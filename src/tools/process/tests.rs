//! Tests of the process tool: starting, polling, input, killing whole
//! process groups, and cleanup when the session's tools are dropped.

use super::*;
use pretty_assertions::assert_eq;
use serde_json::Value;

/// Long enough for a loaded machine, short of the processes' own 30 s.
const DEADLINE: Duration = Duration::from_secs(10);

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    tool: ProcessTool,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::local(dir.path().to_path_buf());
        Self {
            _dir: dir,
            ctx,
            tool: ProcessTool::new(),
        }
    }

    async fn call(&self, args: Value) -> ToolOutput {
        self.tool.execute(args, &self.ctx).await
    }

    async fn start(&self, command: &str) -> ToolOutput {
        let output = self
            .call(json!({"action": "start", "command": command}))
            .await;
        assert!(!output.is_error, "{}", output.text());
        output
    }

    async fn poll(&self, id: &str) -> ToolOutput {
        self.call(json!({"action": "poll", "id": id})).await
    }

    /// Polls `id` until the output gathered over the polls satisfies
    /// `done`; returns that output.
    async fn poll_until(&self, id: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        let mut gathered = String::new();
        loop {
            let output = self.poll(id).await;
            assert!(!output.is_error, "{}", output.text());
            gathered.push_str(output.details["output"].as_str().unwrap());
            if done(&gathered) {
                return gathered;
            }
            assert!(
                Instant::now() < deadline,
                "gave up polling {id}; got {gathered:?}"
            );
            tokio::time::sleep(CHECK_INTERVAL).await;
        }
    }

    /// Polls `id` until it has exited; returns the last poll.
    async fn poll_until_exited(&self, id: &str) -> ToolOutput {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let output = self.poll(id).await;
            if output.details["state"] == "exited" {
                return output;
            }
            assert!(Instant::now() < deadline, "{id} did not exit");
            tokio::time::sleep(CHECK_INTERVAL).await;
        }
    }
}

/// Details without what changes from run to run.
fn stable(details: &Value) -> Value {
    let mut details = details.clone();
    if let Some(object) = details.as_object_mut() {
        object.remove("pid");
        object.remove("runtimeMs");
    }
    details
}

/// Whether `pid` is a live process (a zombie has already ended).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z' | 'X') | None)
        }
    }
}

/// Live processes whose command line mentions `marker`.
fn pids_with(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(marker) && alive(pid) {
            pids.push(pid);
        }
    }
    pids
}

async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(CHECK_INTERVAL).await;
    }
}

/// The number after `name=` in `text`.
fn number_after(text: &str, name: &str) -> i32 {
    let at = text.find(&format!("{name}=")).unwrap() + name.len() + 1;
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn start_returns_early_output_and_poll_returns_what_follows() {
    let f = Fixture::new();
    let started = f.start("echo ready; sleep 0.5; echo later; sleep 30").await;
    assert_eq!(started.details["id"], "p1");
    assert_eq!(started.details["output"], "ready\n");
    assert!(
        started.text().starts_with("Started p1: echo ready;"),
        "{}",
        started.text()
    );
    let later = f.poll_until("p1", |out| out.contains("later")).await;
    // What start showed is not repeated.
    assert_eq!(later, "later\n");

    let quiet = f.poll("p1").await;
    assert_eq!(
        stable(&quiet.details),
        json!({
            "id": "p1",
            "command": "echo ready; sleep 0.5; echo later; sleep 30",
            "state": "running",
            "exitCode": null,
            "signal": null,
            "output": "",
            "truncated": false,
        })
    );
    let text = quiet.text();
    assert!(
        text.ends_with("New output: (none since the last poll)"),
        "{text}"
    );
}

#[tokio::test]
async fn send_types_into_the_process_and_poll_shows_the_echo() {
    let f = Fixture::new();
    f.start("cat").await;
    let sent = f
        .call(json!({"action": "send", "id": "p1", "input": "hello\n"}))
        .await;
    assert_eq!(
        sent.text(),
        "Sent 6 bytes to p1. Poll it to see the response."
    );
    // The terminal echoes the line, then cat prints it.
    let output = f.poll_until("p1", |out| out == "hello\nhello\n").await;
    assert_eq!(output, "hello\nhello\n");

    let partial = f
        .call(json!({"action": "send", "id": "p1", "input": "abc"}))
        .await;
    assert_eq!(
        partial.text(),
        "Sent 3 bytes to p1. Poll it to see the response. The input does not end with a \
         newline; a program reading lines waits until you send \"\\n\"."
    );
}

#[tokio::test]
async fn ctrl_c_interrupts_the_process() {
    let f = Fixture::new();
    f.start("sleep 30").await;
    f.call(json!({"action": "send", "id": "p1", "input": "\u{3}"}))
        .await;
    let exited = f.poll_until_exited("p1").await;
    assert_eq!(exited.details["signal"], "Interrupt");
}

#[tokio::test]
async fn kill_ends_the_whole_process_group() {
    let f = Fixture::new();
    let started = f
        .start("sleep 300 & echo \"child=$!\"; echo \"shell=$$\"; wait")
        .await;
    let mut output = started.details["output"].as_str().unwrap().to_string();
    if !output.contains("shell=") {
        output.push_str(&f.poll_until("p1", |out| out.contains("shell=")).await);
    }
    let child = number_after(&output, "child");
    let shell = number_after(&output, "shell");
    assert!(alive(child) && alive(shell));

    let killed = f.call(json!({"action": "kill", "id": "p1"})).await;
    assert!(!killed.is_error, "{}", killed.text());
    assert_eq!(
        stable(&killed.details),
        json!({
            "id": "p1",
            "command": "sleep 300 & echo \"child=$!\"; echo \"shell=$$\"; wait",
            "state": "exited",
            "exitCode": null,
            "signal": "Terminated",
            "output": "",
            "truncated": false,
        })
    );
    assert!(
        killed.text().starts_with("Killed p1: sleep 300 & echo"),
        "{}",
        killed.text()
    );
    wait_for("the group to end", || !alive(child) && !alive(shell)).await;

    // Killing it again finds nothing to stop.
    let again = f.call(json!({"action": "kill", "id": "p1"})).await;
    assert!(
        again
            .text()
            .ends_with("It had already ended; nothing was left to stop."),
        "{}",
        again.text()
    );
}

#[tokio::test]
async fn kill_stops_what_an_exited_shell_left_running() {
    let f = Fixture::new();
    let marker = format!("pincer-leftover-{}", uuid::Uuid::new_v4());
    // The leftover ignores the SIGHUP the kernel sends when the shell,
    // the terminal's session leader, exits (set before the fork, so
    // there is no race with that exit).
    f.start(&format!("trap '' HUP; (sleep 300; echo {marker}) &"))
        .await;
    f.poll_until_exited("p1").await;
    assert!(!pids_with(&marker).is_empty());

    let killed = f.call(json!({"action": "kill", "id": "p1"})).await;
    assert!(
        killed
            .text()
            .ends_with("Its shell had already exited; the processes it left running were stopped."),
        "{}",
        killed.text()
    );
    wait_for("the leftover to end", || pids_with(&marker).is_empty()).await;
}

#[tokio::test]
async fn list_shows_each_process_and_its_state() {
    let f = Fixture::new();
    let empty = f.call(json!({"action": "list"})).await;
    assert_eq!(
        empty,
        ToolOutput {
            details: json!({"processes": []}),
            ..ToolOutput::ok(
                "No background processes in this session. Start one with action \"start\"."
            )
        }
    );

    f.start("sleep 30").await;
    f.start("exit 3").await;
    f.poll_until_exited("p2").await;
    let list = f.call(json!({"action": "list"})).await;
    let processes: Vec<Value> = list.details["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(stable)
        .collect();
    assert_eq!(
        processes,
        vec![
            json!({"id": "p1", "command": "sleep 30", "state": "running", "exitCode": null, "signal": null}),
            json!({"id": "p2", "command": "exit 3", "state": "exited", "exitCode": 3, "signal": null}),
        ]
    );
    let lines: Vec<String> = list.text().lines().map(str::to_string).collect();
    assert_eq!(lines[0], "Background processes (2):");
    assert!(lines[1].starts_with("p1: running for "), "{}", lines[1]);
    assert!(lines[1].ends_with(" — sleep 30"), "{}", lines[1]);
    assert!(
        lines[2].starts_with("p2: exited with code 3 after "),
        "{}",
        lines[2]
    );
}

#[tokio::test]
async fn an_exited_process_shows_its_exit_code_and_refuses_input() {
    let f = Fixture::new();
    f.start("echo bye; exit 7").await;
    let exited = f.poll_until_exited("p1").await;
    assert_eq!(exited.details["exitCode"], 7);
    assert!(
        exited.text().contains("State: exited with code 7 after "),
        "{}",
        exited.text()
    );
    assert_eq!(
        f.call(json!({"action": "send", "id": "p1", "input": "x\n"}))
            .await,
        ToolOutput::error(
            "p1 has already exited with code 7, so it cannot take input. Poll it for its \
             last output, or start the command again."
        )
    );
}

#[tokio::test]
async fn unknown_and_missing_ids_say_which_exist() {
    let f = Fixture::new();
    assert_eq!(
        f.poll("p9").await,
        ToolOutput::error(
            "No background process has id \"p9\": this session has not started any. Start \
             one with action \"start\"."
        )
    );
    f.start("sleep 30").await;
    assert_eq!(
        f.call(json!({"action": "kill", "id": "p9"})).await,
        ToolOutput::error(
            "No background process has id \"p9\". This session's processes are p1; use \
             action \"list\" to see them."
        )
    );
    assert_eq!(
        f.call(json!({"action": "poll"})).await,
        ToolOutput::error(
            "poll needs `id`: the id that start returned, e.g. \"p1\". Use action \"list\" \
             to see the ids."
        )
    );
    assert_eq!(
        f.call(json!({"action": "start"})).await,
        ToolOutput::error(
            "start needs `command`: the shell command line to run in the background, e.g. \
             \"npm run dev\"."
        )
    );
    assert_eq!(
        f.call(json!({"action": "send", "id": "p1"})).await,
        ToolOutput::error(
            "send needs `input`: the text to type into the process. No newline is added, \
             so end it with \"\\n\" to submit a line."
        )
    );
    // A bare number names the process too.
    assert!(!f.poll("1").await.is_error);
}

#[tokio::test]
async fn dropping_the_tool_kills_its_processes() {
    let f = Fixture::new();
    let marker = format!("pincer-drop-{}", uuid::Uuid::new_v4());
    // The shell stays (it has work after sleep), its command line marked.
    let started = f.start(&format!("sleep 30; echo {marker}")).await;
    let shell = i32::try_from(started.details["pid"].as_i64().unwrap()).unwrap();
    assert_eq!(pids_with(&marker), vec![shell]);

    let Fixture { tool, _dir, .. } = f;
    drop(tool);
    wait_for("the dropped tool's processes to end", || {
        pids_with(&marker).is_empty() && !alive(shell)
    })
    .await;
}

#[test]
fn schema_is_an_object_with_action_required() {
    assert_eq!(
        *ProcessTool::new().parameters(),
        json!({
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["start", "list", "poll", "send", "kill"],
                    "description": "\"start\" runs `command` in the background and returns its id with its first output; \"list\" shows this session's processes; \"poll\" returns what `id` printed since the last poll and its state; \"send\" types `input` into `id`; \"kill\" stops `id` and everything it started."
                },
                "command": {
                    "type": ["string", "null"],
                    "description": "For start: the shell command line to run with bash in the working directory, e.g. \"npm run dev\"."
                },
                "id": {
                    "type": ["string", "null"],
                    "description": "For poll, send and kill: the id that start returned, e.g. \"p1\"."
                },
                "input": {
                    "type": ["string", "null"],
                    "description": "For send: the text to type into the process, exactly as given. No newline is added: end it with \"\\n\" to submit a line. Control characters act as keys (\"\\u0003\" is Ctrl-C, \"\\u0004\" is Ctrl-D)."
                }
            },
            "required": ["action"]
        })
    );
}

#[test]
fn describe_titles_each_action() {
    let tool = ProcessTool::new();
    let title = |args: Value| {
        let info = tool.describe(&args, Path::new("/work"));
        assert_eq!(info.kind, ToolKind::Execute);
        info.title
    };
    assert_eq!(
        title(json!({"action": "start", "command": "npm run dev"})),
        "Start: npm run dev"
    );
    assert_eq!(
        title(json!({"action": "start", "command": "make\nmake install"})),
        "Start: make …"
    );
    assert_eq!(title(json!({"action": "poll", "id": "p1"})), "Poll p1");
    assert_eq!(
        title(json!({"action": "send", "id": "p2", "input": "q"})),
        "Send input to p2"
    );
    assert_eq!(title(json!({"action": "kill", "id": "p1"})), "Kill p1");
    assert_eq!(
        title(json!({"action": "list"})),
        "List background processes"
    );
    assert!(tool.mutating());
}

#[test]
fn permission_scopes_are_the_commands_for_start_and_the_action_otherwise() {
    let tool = ProcessTool::new();
    assert_eq!(
        tool.permission_scopes(
            &json!({"action": "start", "command": "npm install && npm run dev"})
        ),
        vec!["npm install".to_string(), "npm run".to_string()]
    );
    assert_eq!(
        tool.permission_scopes(&json!({"action": "poll", "id": "p1"})),
        vec!["process poll".to_string()]
    );
    assert_eq!(
        tool.permission_scopes(&json!({"action": "list"})),
        vec!["process list".to_string()]
    );
    assert_eq!(
        tool.permission_scopes(&json!({"action": "start"})),
        vec!["process start".to_string()]
    );
}

#[test]
fn unpolled_output_is_bounded_and_the_cut_is_counted() {
    let mut output = Output::default();
    let line = format!("{}\n", "x".repeat(1023));
    for _ in 0..1100 {
        output.push(line.as_bytes());
    }
    assert!(output.unread.len() <= MAX_BUFFERED);
    assert_eq!(output.unread.len() + output.dropped, 1100 * 1024);
    assert!(output.unread.starts_with('x'));
}

#[test]
fn bound_keeps_the_last_lines_and_bytes() {
    assert_eq!(bound("a\nb\n", 0), ("a\nb\n".to_string(), 0));
    assert_eq!(bound("a\nb\n", 10), ("a\nb\n".to_string(), 10));

    let many: String = (1..=2_005).map(|i| format!("{i}\n")).collect();
    let (kept, cut) = bound(&many, 0);
    let expected: String = (6..=2_005).map(|i| format!("{i}\n")).collect();
    assert_eq!(kept, expected);
    assert_eq!(cut, many.len() - expected.len());

    let wide = format!("{}\n", "y".repeat(999)).repeat(60);
    let (kept, cut) = bound(&wide, 0);
    assert_eq!(kept, format!("{}\n", "y".repeat(999)).repeat(51));
    assert_eq!(cut, 9 * 1000);

    let one_line = "z".repeat(60_000);
    let (kept, cut) = bound(&one_line, 0);
    assert_eq!(kept, "z".repeat(MAX_BYTES));
    assert_eq!(cut, 60_000 - MAX_BYTES);
}

#[test]
fn durations_read_naturally() {
    assert_eq!(format_duration(Duration::from_millis(900)), "0s");
    assert_eq!(format_duration(Duration::from_secs(75)), "1m 15s");
    assert_eq!(format_duration(Duration::from_secs(7_260)), "2h 1m");
}

/// The waiter thread can see the exit before the reader has drained the
/// terminal; what is reported as the end must include the last output.
#[tokio::test]
async fn the_final_output_waits_for_the_terminal_to_drain() {
    let shared = Arc::new(Shared::default());
    shared.lock().push(b"compiling\r\n");
    shared.lock().exit = Some(Exit {
        ended: Ended::Code(0),
        at: Instant::now(),
    });
    let reader = Arc::clone(&shared);
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        let mut output = reader.lock();
        output.push(b"built-it\r\n");
        output.close();
    });
    let recent = final_output(&shared).await;
    late.join().unwrap();
    assert_eq!(last_lines(&recent), " Last output:\ncompiling\nbuilt-it");
}

/// A terminal a left-behind child holds open does not hold the report.
#[tokio::test]
async fn the_final_output_does_not_wait_long_for_a_terminal_held_open() {
    let shared = Shared::default();
    shared.lock().push(b"done\r\n");
    let started = Instant::now();
    let recent = final_output(&shared).await;
    assert!(started.elapsed() < KILL_DRAIN + Duration::from_millis(400));
    assert_eq!(last_lines(&recent), " Last output:\ndone");
}

/// Polling a process whose terminal a child holds open waits once, after
/// the exit, not on every poll.
#[tokio::test]
async fn the_final_output_waits_only_just_after_the_exit() {
    let shared = Shared::default();
    shared.lock().push(b"done\r\n");
    shared.lock().exit = Some(Exit {
        ended: Ended::Code(0),
        at: Instant::now() - KILL_DRAIN * 2,
    });
    let started = Instant::now();
    final_output(&shared).await;
    assert!(started.elapsed() < Duration::from_millis(100));
}
