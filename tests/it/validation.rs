//! End-to-end: what pincer checks before it acts on what an editor or a
//! model sends — a session's cwd, a tool call's arguments (before anyone is
//! asked about the call), files linked into a prompt (only regular files,
//! only so much) — and that cancelling `/compact` answers `cancelled`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, requests_of};
use support::mock_model::{MockModel, Reply};
use support::prompt;
use support::sse::{anthropic_text, anthropic_tool_call};

fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    support::spawn_anthropic(sandbox, mock)
}

fn invalid_params(message: String) -> Value {
    json!({"code": -32602, "message": "Invalid params", "data": {"message": message}})
}

#[tokio::test]
async fn a_cwd_that_is_missing_or_not_a_directory_is_invalid_params() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let missing = sandbox.work().join("no-such-dir");
    let file = sandbox.write("a-file.txt", "x");
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;

    let cases = [
        (
            missing.clone(),
            format!(
                "cwd {} does not exist; open a folder that exists",
                missing.display()
            ),
        ),
        (
            file.clone(),
            format!(
                "cwd {} is not a directory; open the folder that contains it",
                file.display()
            ),
        ),
    ];
    for (cwd, message) in cases {
        let id = acp
            .send("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let (response, _) = acp.until_response(id).await;
        assert_eq!(response["error"], invalid_params(message.clone()));
        for method in ["session/load", "session/resume"] {
            let id = acp
                .send(
                    method,
                    json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
                )
                .await;
            let (response, _) = acp.until_response(id).await;
            assert_eq!(
                response["error"],
                invalid_params(message.clone()),
                "{method}"
            );
        }
    }
    // Nothing was created for them.
    assert!(!missing.exists());
    // And a good cwd still works.
    acp.new_session(&sandbox.work()).await;
}

/// A `write` without `content`, or with content of the wrong type, is
/// refused with a result that says why: the user is not asked about a call
/// that cannot run as shown.
#[tokio::test]
async fn tool_arguments_are_checked_against_the_schema_before_permission_is_asked() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let target = sandbox.work().join("made.txt");
    let calls = [
        (
            json!({"path": target}),
            "\"content\" is a required property",
        ),
        (
            json!({"path": target, "content": 5}),
            "/content: 5 is not of type \"string\"",
        ),
    ];
    for (input, _) in &calls {
        mock.push(Reply::sse(anthropic_tool_call("toolu_bad", "write", input)));
        mock.push(Reply::fixture("anthropic/after_tool.sse"));
    }
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    for (turn, (_, problem)) in calls.iter().enumerate() {
        let id = acp.send("session/prompt", prompt(&session, "write")).await;
        let (response, before) = acp
            .drive(id, |method, _| {
                panic!("pincer asked the client {method} about a malformed call")
            })
            .await;
        assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
        assert_eq!(requests_of(&before, "session/request_permission").len(), 0);
        let requests = mock.requests();
        let mut result = requests[turn * 2 + 1].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"][0]
            .clone();
        // Prompt caching marks the last block; not the point here.
        result.as_object_mut().unwrap().remove("cache_control");
        assert_eq!(
            result,
            json!({
                "type": "tool_result",
                "tool_use_id": "toolu_bad",
                "is_error": true,
                "content": [{"type": "text", "text": format!("Invalid arguments for write: {problem}. Nothing was run. Check the tool's parameter schema and call it again.")}]
            })
        );
    }
    assert!(!target.exists());
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// `session/cancel` while `/compact`'s summary request is streaming answers
/// the prompt `cancelled` (it used to answer `end_turn`), and the session
/// goes on with its history as it was.
#[tokio::test]
async fn cancelling_compact_answers_cancelled_and_the_session_keeps_working() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("first answer", 50)));
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&session, "first question"))
        .await;

    // The summary streams one event, then nothing until pincer hangs up.
    mock.push_side(Reply::Stall {
        body: anthropic_text("## Goal\nnever finished", 50),
        events: 2,
    });
    let id = acp
        .send("session/prompt", prompt(&session, "/compact"))
        .await;
    mock.wait_for_side_requests(1, Duration::from_secs(10))
        .await;
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));

    mock.push(Reply::sse(anthropic_text("second answer", 60)));
    let result = acp
        .call("session/prompt", prompt(&session, "second question"))
        .await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    let body = mock.requests().last().unwrap().body.clone();
    let texts: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        vec!["first question", "first answer", "second question"]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// The text of the user's message in the last model request.
fn last_user_text(mock: &MockModel) -> String {
    let body = support::without_time_lines(&mock.requests().last().unwrap().body);
    let user = body["messages"].as_array().unwrap().last().unwrap().clone();
    user["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn link(session: &str, path: &std::path::Path) -> Value {
    json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "look"},
        {"type": "resource_link", "name": "it", "uri": format!("file://{}", path.display())}
    ]})
}

/// A link to /dev/zero (endless) or to a FIFO in the project (a read that
/// never returns) is answered at once with a note instead of content.
#[tokio::test]
async fn prompt_links_to_devices_and_fifos_are_not_read() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let fifo = sandbox.work().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // A committed symlink is how a repository would bring one along.
    let zero_link = sandbox.work().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &zero_link).unwrap();
    let cases = [
        (
            fifo.clone(),
            format!(
                "[Linked file {} was not read: it is a named pipe (FIFO), and only regular files are attached.]",
                fifo.display()
            ),
        ),
        (
            std::path::PathBuf::from("/dev/zero"),
            "[Linked file /dev/zero was not read: it is a device, and only regular files are attached.]"
                .to_string(),
        ),
        (
            zero_link.clone(),
            format!(
                "[Linked file {} was not read: it is a device, and only regular files are attached.]",
                zero_link.display()
            ),
        ),
    ];
    for _ in &cases {
        mock.push(Reply::sse(anthropic_text("ok", 10)));
    }
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    for (path, note) in cases {
        // `call` fails after TIMEOUT if the read hangs.
        let result = acp.call("session/prompt", link(&session, &path)).await;
        assert_eq!(result, json!({"stopReason": "end_turn"}));
        assert_eq!(last_user_text(&mock), format!("look\n{note}"));
    }
}

#[tokio::test]
async fn a_huge_linked_file_is_cut_with_a_note() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("ok", 10)));
    // 8 MB, of which 256 KB reach the model.
    let big = sandbox.write("big.txt", &"0123456789abcde\n".repeat(512 * 1024));
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", link(&session, &big)).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let uri = format!("file://{}", big.display());
    let kept = "0123456789abcde\n".repeat(256 * 1024 / 16);
    assert_eq!(
        last_user_text(&mock),
        format!(
            "look\n<file uri=\"{uri}\">\n{kept}\n</file>\n[The file is longer than 256 KB and was cut there; read the rest of {} with the read tool.]",
            big.display()
        )
    );
}
