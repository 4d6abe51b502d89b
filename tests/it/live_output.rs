//! End-to-end: the output of a command pincer runs itself reaches the
//! editor while the command runs. A client without terminals gets it as the
//! call's content (the end of the output so far, in a console block); a
//! client that advertises Zed's `_meta.terminal_output` gets a display-only
//! terminal: `terminal_info` on the call, `terminal_output` chunks while it
//! runs, `terminal_exit` at the end.
//!
//! "While it runs" is proven without timing: the command waits for a
//! marker file that the test creates only once it has seen the first
//! output in an update, so the command cannot end before that update came.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, process_running, unique_sleep};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;
use support::{prompt, selected, spawn_anthropic, tool_results, wait_until};

/// The client capabilities of a client without terminals.
fn plain() -> Value {
    json!({})
}

/// Zed's extension without the terminal capability: pincer runs commands
/// itself and feeds the client's display-only terminal.
fn zed_meta() -> Value {
    json!({"_meta": {"terminal_output": true}})
}

/// One prompt whose model runs `command` with `bash` (then ends its turn),
/// watched update by update.
struct Run {
    sandbox: Sandbox,
    mock: MockModel,
    acp: Acp,
    session: String,
    /// `{marker}` in the command: a file no other test uses.
    marker: PathBuf,
    command: String,
    /// What the updates of a client without the extension carried in
    /// `_meta.terminal_output` (for clients such as agent-shell that stream
    /// that alone), one entry per update; stripped from the updates.
    streamed: Vec<String>,
}

/// Takes `_meta.terminal_output.data` off a plain live update (one with
/// content; the extension's updates have none) and returns it.
fn take_streamed(update: &mut Value) -> Option<String> {
    if update.get("content").is_none()
        || update["sessionUpdate"] != "tool_call_update"
        || update["_meta"].get("terminal_output").is_none()
    {
        return None;
    }
    let meta = update.as_object_mut().unwrap().remove("_meta")?;
    assert_eq!(meta["terminal_output"]["terminal_id"], "c1", "{meta}");
    Some(
        meta["terminal_output"]["data"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

impl Run {
    async fn start(capabilities: Value, command: &str) -> Self {
        let sandbox = Sandbox::new();
        let marker = sandbox.dir.path().join("go");
        let command = command.replace("{marker}", &format!("'{}'", marker.display()));
        let mock = MockModel::start().await;
        mock.push(Reply::sse(anthropic_tool_call(
            "c1",
            "bash",
            &json!({"command": command}),
        )));
        mock.push(Reply::fixture("anthropic/after_tool.sse"));
        let mut acp = spawn_anthropic(&sandbox, &mock);
        acp.initialize_with(capabilities).await;
        let session = acp.new_session(&sandbox.work()).await;
        Self {
            sandbox,
            mock,
            acp,
            session,
            marker,
            command,
            streamed: Vec::new(),
        }
    }

    /// Prompts and reads until the answer, allowing the call and calling
    /// `watch` with each update of the call as it arrives. Returns the
    /// answer and the call's updates, in order.
    async fn prompt(&mut self, mut watch: impl FnMut(&Self, &Value)) -> (Value, Vec<Value>) {
        let id = self
            .acp
            .send("session/prompt", prompt(&self.session, "run it"))
            .await;
        let mut calls = Vec::new();
        loop {
            let message = self.acp.next().await;
            if message.get("method").is_none() && message["id"] == json!(id) {
                return (message, calls);
            }
            match message["method"].as_str() {
                Some("session/request_permission") => {
                    let request = message["id"].clone();
                    self.acp.respond(&request, selected("allow_once")).await;
                }
                Some("session/update") if message["params"]["update"]["toolCallId"] == "c1" => {
                    let mut update = message["params"]["update"].clone();
                    if let Some(data) = take_streamed(&mut update) {
                        self.streamed.push(data);
                    }
                    watch(self, &update);
                    calls.push(update);
                }
                _ => {}
            }
        }
    }

    /// Lets the command go on.
    fn release(&self) {
        if !self.marker.exists() {
            std::fs::write(&self.marker, "").unwrap();
        }
    }

    /// The `tool_call` every client gets, before pincer asks to run it.
    fn tool_call(&self) -> Value {
        tool_call(&self.command)
    }

    /// The `tool_call` a client with Zed's extension gets: a terminal.
    fn terminal_call(&self) -> Value {
        let mut call = self.tool_call();
        call["content"] = json!([{"type": "terminal", "terminalId": "c1"}]);
        call["_meta"] = json!({"terminal_info": {"terminal_id": "c1", "cwd": self.sandbox.work()}});
        call
    }
}

/// The `tool_call` of a `bash` call running `command`.
fn tool_call(command: &str) -> Value {
    // A title is the command's first 120 characters.
    let title = if command.chars().count() > 120 {
        format!("{}…", command.chars().take(119).collect::<String>())
    } else {
        command.to_string()
    };
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": title,
        "name": "bash",
        "kind": "execute",
        "status": "in_progress",
        "rawInput": {"command": command},
    })
}

/// A live update of a client without terminals: the output so far.
fn live(text: &str) -> Value {
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "name": "bash",
        "content": [{"type": "content", "content": {"type": "text",
                     "text": format!("```console\n{text}\n```")}}],
    })
}

/// A live update of a client with Zed's extension: new output.
fn terminal_output(data: &str) -> Value {
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "name": "bash",
        "_meta": {"terminal_output": {"terminal_id": "c1", "data": data}},
    })
}

fn details(exit_code: Option<u32>, cancelled: bool) -> Value {
    json!({
        "exitCode": exit_code,
        "timedOut": false,
        "cancelled": cancelled,
        "truncated": false,
        "fullOutputPath": null,
    })
}

/// The end of a call as every client without the extension gets it.
fn finished(status: &str, text: &str, details: Value) -> Value {
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": status,
        "name": "bash",
        "content": [{"type": "content", "content": {"type": "text", "text": text}}],
        "rawOutput": details,
    })
}

/// The end of a call as a client with Zed's extension gets it.
fn terminal_exit(status: &str, details: Value, exit_code: Option<u32>) -> Value {
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": status,
        "name": "bash",
        "content": [{"type": "terminal", "terminalId": "c1"}],
        "rawOutput": details,
        "_meta": {"terminal_exit": {"terminal_id": "c1", "exit_code": exit_code, "signal": null}},
    })
}

/// Prints a line (drawn over a progress figure, in bold: what the user
/// sees is cleaned as the model's result is), waits for the marker, prints
/// another.
const TWO_LINES: &str = r"printf '10%%\r\033[1mfirst\033[0m line\n'; until [ -e {marker} ]; do sleep 0.01; done; echo second line";

#[tokio::test]
async fn a_client_without_terminals_sees_the_output_while_the_command_runs() {
    let mut run = Run::start(plain(), TWO_LINES).await;
    let (answer, updates) = run
        .prompt(|run, update| {
            if *update == live("first line") {
                run.release();
            }
        })
        .await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    // The second line may or may not have been shown live before the
    // command was seen to end; nothing else comes between.
    let shown_live = live("first line\nsecond line");
    let updates: Vec<Value> = updates.into_iter().filter(|u| *u != shown_live).collect();
    assert_eq!(
        updates,
        vec![
            run.tool_call(),
            live("first line"),
            finished(
                "completed",
                "first line\nsecond line",
                details(Some(0), false)
            ),
        ]
    );
    assert_eq!(
        tool_results(&run.mock, 1),
        vec![(
            "c1".to_string(),
            false,
            "first line\nsecond line".to_string()
        )]
    );
    // The same lines, each once, as `_meta.terminal_output`.
    assert_eq!(run.streamed.concat(), "first line\nsecond line\n");
}

#[tokio::test]
async fn a_client_with_the_terminal_extension_gets_a_terminal_fed_as_the_command_runs() {
    let mut run = Run::start(zed_meta(), &format!("{TWO_LINES}; exit 3")).await;
    let (answer, updates) = run
        .prompt(|run, update| {
            if *update == terminal_output("first line\n") {
                run.release();
            }
        })
        .await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        updates,
        vec![
            run.terminal_call(),
            terminal_output("first line\n"),
            terminal_output("second line\n"),
            terminal_exit("failed", details(Some(3), false), Some(3)),
        ]
    );
    // The model's result is what it always was.
    assert_eq!(
        tool_results(&run.mock, 1),
        vec![(
            "c1".to_string(),
            true,
            "first line\nsecond line\n\nCommand exited with code 3".to_string()
        )]
    );
}

/// A character whose bytes come in two reads (the command prints its
/// first byte, waits, then prints the rest) arrives whole, in both shapes.
#[tokio::test]
async fn a_character_split_across_reads_arrives_whole() {
    let command =
        r"printf 'start\ncaf\303'; until [ -e {marker} ]; do sleep 0.01; done; printf '\251 ok\n'";

    let mut run = Run::start(plain(), command).await;
    let (_, updates) = run
        .prompt(|run, update| {
            if *update == live("start\ncaf") {
                run.release();
            }
        })
        .await;
    // The terminal flushes printf's output at its newline, so the first
    // line may come on its own; the last may be shown before the end.
    let maybe = [live("start"), live("start\ncaf\u{e9} ok")];
    let updates: Vec<Value> = updates.into_iter().filter(|u| !maybe.contains(u)).collect();
    assert_eq!(
        updates,
        vec![
            run.tool_call(),
            live("start\ncaf"),
            finished("completed", "start\ncaf\u{e9} ok", details(Some(0), false)),
        ]
    );
    assert_eq!(run.streamed.concat(), "start\ncaf\u{e9} ok\n");

    let mut run = Run::start(zed_meta(), command).await;
    let (_, updates) = run
        .prompt(|run, update| {
            if *update == terminal_output("start\n") {
                run.release();
            }
        })
        .await;
    assert_eq!(
        updates,
        vec![
            run.terminal_call(),
            terminal_output("start\n"),
            terminal_output("caf\u{e9} ok\n"),
            terminal_exit("completed", details(Some(0), false), Some(0)),
        ]
    );
}

/// Most bytes of output one live update may carry (pincer's cap, 16 KiB,
/// plus a note).
const MAX_LIVE_BYTES: usize = 16 * 1024 + 100;
/// Far fewer updates than the ~1,200 reads the flood takes.
const MAX_LIVE_UPDATES: usize = 100;

/// Five megabytes of `y` lines: a bounded number of bounded updates, and
/// every line accounted for in the terminal (shown, or counted in a note).
#[tokio::test]
async fn a_flood_of_output_gives_few_small_updates() {
    let command = "yes | head -c 5000000";

    let mut run = Run::start(plain(), command).await;
    let (answer, updates) = run.prompt(|_, _| {}).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    let (last, live_updates) = updates[1..].split_last().unwrap();
    assert!(
        live_updates.len() <= MAX_LIVE_UPDATES,
        "{} updates",
        live_updates.len()
    );
    for update in live_updates {
        let text = update["content"][0]["content"]["text"].as_str().unwrap();
        let inside = text
            .strip_prefix("```console\n")
            .and_then(|t| t.strip_suffix("\n```"))
            .unwrap();
        assert!(inside.len() <= MAX_LIVE_BYTES, "{} bytes", inside.len());
        assert!(inside.split('\n').all(|line| line == "y"), "{inside:?}");
    }
    assert_eq!(last["status"], "completed");
    assert_eq!(last["rawOutput"]["truncated"], true);
    assert!(run.streamed.len() <= MAX_LIVE_UPDATES);
    for data in &run.streamed {
        assert!(data.len() <= MAX_LIVE_BYTES, "{} bytes", data.len());
    }

    let mut run = Run::start(zed_meta(), command).await;
    let (answer, updates) = run.prompt(|_, _| {}).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    let (last, outputs) = updates[1..].split_last().unwrap();
    assert!(
        outputs.len() <= MAX_LIVE_UPDATES,
        "{} updates",
        outputs.len()
    );
    let mut lines = 0;
    for update in outputs {
        let data = update["_meta"]["terminal_output"]["data"].as_str().unwrap();
        assert!(data.len() <= MAX_LIVE_BYTES, "{} bytes", data.len());
        for line in data.strip_suffix('\n').unwrap().split('\n') {
            match line
                .strip_prefix("[… ")
                .and_then(|l| l.strip_suffix(" lines not shown …]"))
            {
                Some(count) => lines += count.parse::<usize>().unwrap(),
                None if line == "y" => lines += 1,
                None => panic!("unexpected line {line:?}"),
            }
        }
    }
    assert_eq!(lines, 2_500_000);
    assert_eq!(last["status"], "completed");
    assert_eq!(
        last["_meta"],
        json!({"terminal_exit": {"terminal_id": "c1", "exit_code": 0, "signal": null}})
    );
}

/// Cancelling while a command streams kills it; its terminal is closed
/// before the prompt is answered, and nothing about it comes after.
#[tokio::test]
async fn cancel_while_streaming_kills_the_command_and_nothing_follows_the_answer() {
    let sleep = unique_sleep();
    let mut run = Run::start(zed_meta(), &format!("echo started; sleep {sleep}")).await;
    let id = run
        .acp
        .send("session/prompt", prompt(&run.session, "run it"))
        .await;
    let mut updates = Vec::new();
    let answer = loop {
        let message = run.acp.next().await;
        if message.get("method").is_none() && message["id"] == json!(id) {
            break message;
        }
        match message["method"].as_str() {
            Some("session/request_permission") => {
                let request = message["id"].clone();
                run.acp.respond(&request, selected("allow_once")).await;
            }
            Some("session/update") if message["params"]["update"]["toolCallId"] == "c1" => {
                let update = message["params"]["update"].clone();
                if update == terminal_output("started\n") {
                    run.acp
                        .notify("session/cancel", json!({"sessionId": run.session}))
                        .await;
                }
                updates.push(update);
            }
            _ => {}
        }
    };
    assert_eq!(answer["result"], json!({"stopReason": "cancelled"}));
    assert_eq!(
        updates,
        vec![
            run.terminal_call(),
            terminal_output("started\n"),
            terminal_exit("failed", details(None, true), None),
        ]
    );
    wait_until(
        "the command was killed",
        std::time::Duration::from_secs(10),
        || !process_running(&sleep),
    )
    .await;
    // A request answered after the cancelled prompt: no update of the
    // call came in between.
    let (_, between) = {
        let list = run.acp.send("session/list", json!({})).await;
        run.acp.until_response(list).await
    };
    let late: Vec<&Value> = between
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter(|m| m["params"]["update"]["toolCallId"] == "c1")
        .collect();
    assert_eq!(late, Vec::<&Value>::new());
}

/// `pincer run --json` prints the updates a client without terminals gets,
/// live ones included, each line still one JSON-RPC notification.
#[tokio::test]
async fn run_json_prints_the_live_updates_as_they_come() {
    use tokio::io::AsyncBufReadExt;

    let sandbox = Sandbox::new();
    let marker = sandbox.dir.path().join("go");
    let command = TWO_LINES.replace("{marker}", &format!("'{}'", marker.display()));
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c1",
        "bash",
        &json!({"command": command}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut cmd = sandbox.command(&["run", "--json", "--mode", "bypass", "run it"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .stdin(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // pincer run prints no names on progress updates (the editor's host
    // adds them).
    let mut live_update = live("first line");
    live_update.as_object_mut().unwrap().remove("name");
    let mut updates = Vec::new();
    let mut streamed = String::new();
    let mut last = Value::Null;
    while let Some(line) =
        tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("pincer run printed nothing for 20 s")
            .unwrap()
    {
        let message: Value = serde_json::from_str(&line).unwrap();
        if message.get("method").is_none() {
            last = message;
            continue;
        }
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        assert_eq!(message["method"], "session/update", "{line}");
        let mut update = message["params"]["update"].clone();
        if update["toolCallId"] == "c1" {
            if let Some(data) = take_streamed(&mut update) {
                streamed.push_str(&data);
            }
            if update == live_update {
                std::fs::write(&marker, "").unwrap();
            }
            updates.push(update);
        }
    }
    assert!(child.wait().await.unwrap().success());
    // `pincer run --json` ends with its result object (tests/it/run_cli.rs).
    assert_eq!(
        (&last["type"], &last["stop_reason"]),
        (&json!("result"), &json!("end_turn"))
    );
    let mut shown_live = live("first line\nsecond line");
    shown_live.as_object_mut().unwrap().remove("name");
    let updates: Vec<Value> = updates.into_iter().filter(|u| *u != shown_live).collect();
    let end = finished(
        "completed",
        "first line\nsecond line",
        details(Some(0), false),
    );
    assert_eq!(updates, vec![tool_call(&command), live_update, end]);
    assert_eq!(streamed, "first line\nsecond line\n");
}
