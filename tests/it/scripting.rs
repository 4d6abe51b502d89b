//! The scripting examples of `docs/scripting.md` run as they are shown:
//! each file under `docs/examples/` is driven against the real `pincer acp`
//! binary (found on `PATH`, as a user's script finds it) talking to the mock
//! model, and the doc's code blocks must equal those files, so the doc
//! cannot show code that was not run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/examples")
        .join(name)
}

/// `program example args…` in the sandbox's project, with `pincer` on
/// `PATH`, a temporary home and the mock model as the Anthropic endpoint.
fn script(sandbox: &Sandbox, mock: &MockModel, program: &str, args: &[&str]) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_pincer")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", sandbox.home())
        .env("PINCER_HOME", sandbox.home())
        // The scripts show how a command is asked about: unsandboxed, as
        // in `Sandbox::command`.
        .env("PINCER_SANDBOX", "off")
        .env("RUST_LOG", "warn")
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .current_dir(sandbox.work())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn finish(cmd: &mut Command) -> Output {
    let child = cmd.spawn().unwrap();
    tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
        .await
        .expect("the example did not finish")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lines a script wrote to stderr about the exchange (`[tool] …`,
/// `[permission] …`, `[stop] …`), without pincer's own log lines.
fn report(stderr: &[u8]) -> Vec<String> {
    text(stderr)
        .lines()
        .filter(|l| l.starts_with('['))
        .map(str::to_string)
        .collect()
}

/// The model asks to run a command that leaves `made.txt`, then answers.
fn model_wants_a_file(mock: &MockModel) {
    mock.push(Reply::sse(anthropic_tool_call(
        "call_1",
        "bash",
        &json!({"command": "echo made > made.txt"}),
    )));
    mock.push(Reply::fixture("anthropic/text.sse"));
}

/// The tool result the model got for `call_1`: (text, is_error).
fn result_of_call(mock: &MockModel) -> (String, bool) {
    let body = &mock.requests()[1].body;
    let messages = body["messages"].as_array().unwrap();
    let block = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == "call_1")
        .unwrap();
    let text = match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => panic!("tool result content: {other}"),
    };
    (text, block["is_error"] == json!(true))
}

#[tokio::test]
async fn the_here_doc_one_liner_opens_a_session() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let out = finish(&mut script(
        &sandbox,
        &mock,
        "sh",
        &[example("handshake.sh").to_str().unwrap()],
    ))
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let messages: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Two answers, in order, then the session's slash commands.
    let shape: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!([
                m.get("id"),
                m.get("method"),
                m["params"]["update"]["sessionUpdate"]
            ])
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            json!([0, null, null]),
            json!([1, null, null]),
            json!([null, "session/update", "available_commands_update"]),
        ]
    );
    assert_eq!(messages[0]["result"]["agentInfo"]["name"], "pincer");
    let session = messages[1]["result"]["sessionId"].as_str().unwrap();
    assert!(session.starts_with("sess_"), "{session}");
    assert_eq!(messages[2]["params"]["sessionId"], session);
    assert_eq!(mock.requests().len(), 0);
}

#[tokio::test]
async fn the_python_script_streams_the_answer_and_allows_the_command() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    model_wants_a_file(&mock);
    let out = finish(&mut script(
        &sandbox,
        &mock,
        "python3",
        &[
            example("prompt.py").to_str().unwrap(),
            "--allow",
            "make the file",
        ],
    ))
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Hello from the mock model.\n");
    assert_eq!(
        report(&out.stderr),
        vec![
            "[tool] echo made > made.txt",
            "[permission] echo made > made.txt: Allow once",
            "[stop] end_turn",
        ]
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("made.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        mock.requests()[0].body["messages"][0]["content"][0]["text"],
        "make the file"
    );
    assert_eq!(result_of_call(&mock), ("(no output)".to_string(), false));
}

#[tokio::test]
async fn the_python_script_rejects_by_default() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    model_wants_a_file(&mock);
    let out = finish(&mut script(
        &sandbox,
        &mock,
        "python3",
        &[example("prompt.py").to_str().unwrap(), "make the file"],
    ))
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        report(&out.stderr),
        vec![
            "[tool] echo made > made.txt",
            "[permission] echo made > made.txt: Reject",
            "[stop] end_turn",
        ]
    );
    assert!(!sandbox.work().join("made.txt").exists());
    let (said, is_error) = result_of_call(&mock);
    assert!(is_error, "{said}");
}

/// The Node example, stopped at its question about the command: the
/// child, the stderr lines so far, and a task collecting the rest.
async fn node_at_permission(
    sandbox: &Sandbox,
    mock: &MockModel,
) -> (
    tokio::process::Child,
    Vec<String>,
    tokio::task::JoinHandle<Vec<String>>,
) {
    let mut child = script(
        sandbox,
        mock,
        "node",
        &[example("prompt.mjs").to_str().unwrap(), "make the file"],
    )
    .spawn()
    .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    tokio::time::timeout(RUN_TIMEOUT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            let asked = line.starts_with("[permission]");
            seen.push(line);
            if asked {
                return;
            }
        }
        panic!("the Node example ended without asking: {seen:?}");
    })
    .await
    .expect("the Node example did not ask for permission");
    let rest = tokio::spawn(async move {
        let mut lines = Vec::new();
        while let Ok(Some(line)) = stderr.next_line().await {
            lines.push(line);
        }
        lines
    });
    (child, seen, rest)
}

async fn node_finished(
    mut child: tokio::process::Child,
    seen: Vec<String>,
    rest: tokio::task::JoinHandle<Vec<String>>,
) -> (std::process::ExitStatus, String, Vec<String>) {
    let mut stdout = String::new();
    let mut out = child.stdout.take().unwrap();
    let status = tokio::time::timeout(RUN_TIMEOUT, async {
        tokio::io::AsyncReadExt::read_to_string(&mut out, &mut stdout)
            .await
            .unwrap();
        child.wait().await.unwrap()
    })
    .await
    .expect("the Node example did not exit");
    let mut stderr = seen;
    stderr.extend(rest.await.unwrap());
    let report = stderr.into_iter().filter(|l| l.starts_with('[')).collect();
    (status, stdout, report)
}

#[tokio::test]
async fn the_node_script_asks_the_user_and_runs_the_command_on_yes() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    model_wants_a_file(&mock);
    let (mut child, seen, rest) = node_at_permission(&sandbox, &mock).await;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"y\n").await.unwrap();
    stdin.flush().await.unwrap();
    let (status, stdout, report) = node_finished(child, seen, rest).await;
    assert!(status.success(), "{report:?}");
    assert_eq!(stdout, "Hello from the mock model.\n");
    assert_eq!(
        report,
        vec![
            "[tool] echo made > made.txt",
            "[permission] echo made > made.txt (y/n)",
            "[stop] end_turn",
        ]
    );
    assert_eq!(result_of_call(&mock), ("(no output)".to_string(), false));
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("made.txt")).unwrap(),
        "made\n"
    );
}

#[tokio::test]
async fn ctrl_c_in_the_node_script_cancels_the_prompt() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    model_wants_a_file(&mock);
    let (child, seen, rest) = node_at_permission(&sandbox, &mock).await;
    // Ctrl-C reaches the script's process group only: pincer runs in its own.
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let (status, stdout, report) = node_finished(child, seen, rest).await;
    assert_eq!(status.code(), Some(1), "{report:?}");
    assert_eq!(stdout, "\n");
    assert_eq!(
        report,
        vec![
            "[tool] echo made > made.txt",
            "[permission] echo made > made.txt (y/n)",
            "[stop] cancelled",
        ]
    );
    assert!(!sandbox.work().join("made.txt").exists());
    // The run stopped at the question: the model was never called again.
    assert_eq!(mock.requests().len(), 1);
}

/// Each `<!-- docs/examples/NAME -->` marker in the doc and the code block
/// after it: (path, code).
fn included_blocks(doc: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .strip_prefix("<!-- ")
            .and_then(|l| l.strip_suffix(" -->"))
            .filter(|p| p.starts_with("docs/examples/"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "{path}: no code block after the marker"
        );
        let mut code = String::new();
        for line in lines.by_ref() {
            if line == "```" {
                break;
            }
            code.push_str(line);
            code.push('\n');
        }
        blocks.push((path.to_string(), code));
    }
    blocks
}

#[test]
fn the_doc_shows_each_example_file_exactly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/scripting.md")).unwrap();
    let shown = included_blocks(&doc);
    let mut files: Vec<String> = std::fs::read_dir(root.join("docs/examples"))
        .unwrap()
        .map(|e| format!("docs/examples/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    files.sort();
    let mut paths: Vec<String> = shown.iter().map(|(p, _)| p.clone()).collect();
    paths.sort();
    assert_eq!(
        paths, files,
        "every example is shown once, and only examples"
    );
    for (path, code) in shown {
        assert_eq!(
            code,
            std::fs::read_to_string(root.join(&path)).unwrap(),
            "{path}"
        );
    }
}

/// What follows an answer is written before pincer ends at the end of
/// stdin, however the threads are scheduled: a new session's slash
/// commands come after its answer, every time of many, also with a
/// busy machine's timing (the runs overlap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_follows_an_answer_is_written_before_the_end_of_stdin_ends_pincer() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let input = format!(
        "{}\n{}\n",
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd": sandbox.work(),"mcpServers":[]}}),
    );
    let runs = (0..40).map(|_| {
        let mut cmd = script(&sandbox, &mock, env!("CARGO_BIN_EXE_pincer"), &["acp"]);
        let input = input.clone();
        async move {
            let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).await.unwrap();
            drop(stdin);
            let out = tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
                .await
                .expect("pincer did not end")
                .unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
            text(&out.stdout)
        }
    });
    let outputs = futures::future::join_all(runs).await;
    let missing = outputs
        .iter()
        .filter(|out| !out.contains("available_commands_update"))
        .count();
    assert_eq!(
        missing, 0,
        "{missing} of 40 runs ended before the session's commands"
    );
    assert!(
        outputs.iter().all(|out| !out.contains("_pincer/held")),
        "a hold's marker was written"
    );
}
